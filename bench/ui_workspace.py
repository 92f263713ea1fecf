"""A workspace with 50 flows and 10,000 finished runs, written the way the engine writes
them, fast: the records are generated directly (no 10,000 processes), then checked by
the engine's own readers. ``python bench/ui_workspace.py DIR`` makes one by hand.

``flow_00`` is a ticker: each round it logs ``tick`` with the wall-clock time it did so,
which is how the latency benchmark times an event from its append to the screen.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import orjson

from flowdrop_tui.core.flows.discovery import describe, discover
from flowdrop_tui.core.paths import Layout
from flowdrop_tui.core.records.listing import index
from flowdrop_tui.core.records.run_record.run_fold import list_run_ids, load_run
from flowdrop_tui.core.records.run_record.run_info import Status

FLOWS = 50
RUNS = 10_000

TICKER = """
    import time
    from flowdrop_tui import flow

    # stall=None: it changes nothing, and must tick on (SPEC §20 would pause it after 5)
    @flow(
        resumable=True,
        stall=None,
        description="Logs a tick every half second (the latency probe)",
    )
    def main(run):
        for round in run.rounds():
            time.sleep(0.25)
            run.log("tick", sent=time.time())
            time.sleep(0.25)
"""

PLAIN = """
    from flowdrop_tui import flow

    @flow(resumable={resumable}, description="Benchmark flow number {n}")
    def main(run):
        for round in run.rounds(range(3)):
            run.state["last"] = round
"""


def _run_id(n: int) -> str:
    day, rest = divmod(n, 86_400 // 8)
    seconds = rest * 8
    return (
        f"2026{1 + day // 28:02d}{1 + day % 28:02d}T{seconds // 3600:02d}{seconds // 60 % 60:02d}"
        f"{seconds % 60:02d}.000Z-{n:06x}"
    )


def stamp(run_id: str, second: int) -> str:
    date, time_ = run_id[:8], run_id[9:15]
    total = int(time_[:2]) * 3600 + int(time_[2:4]) * 60 + int(time_[4:6]) + second
    return (
        f"{date[:4]}-{date[4:6]}-{date[6:8]}T{total // 3600:02d}:{total // 60 % 60:02d}:"
        f"{total % 60:02d}.000Z"
    )


def created_event(run_id: str, key: str, first: int, source: str | None) -> dict[str, Any]:
    """A ``created`` event as the engine writes it, for a generated record."""
    return {
        "t": stamp(run_id, 0),
        "event": "created",
        "v": 1,
        "run": run_id,
        "key": key,
        "flow": f"flows/{key}",
        "start": "thread" if source else "fresh",
        "source": source,
        "source_status": "cancelled" if source else None,
        "snapshot": None,
        "first_round": first,
        "resumable": True,
        "pid": 1,
        "pgid": 1,
        "host": "bench",
        "git": None,
    }


def _record(runs: Path, run_id: str, key: str, first: int, source: str | None) -> None:
    folder = runs / run_id
    os.makedirs(folder / "sessions")
    events = [
        created_event(run_id, key, first, source),
        {"t": stamp(run_id, 0), "event": "started", "pid": 1, "pgid": 1},
    ]
    for number in range(first, first + 3):
        events.append(
            {
                "t": stamp(run_id, 1),
                "event": "round_started",
                "key": key,
                "round": number,
                "index": None,
            }
        )
        events.append(
            {
                "t": stamp(run_id, 2),
                "event": "round_ended",
                "key": key,
                "round": number,
                "index": None,
                "outcome": "ok",
                "seconds": 1.0,
            }
        )
    events.append(
        {
            "t": stamp(run_id, 3),
            "event": "ended",
            "outcome": "cancelled",
            "result": None,
            "error": None,
            "git": None,
            "round": first + 2,
        }
    )
    (folder / "cycle.jsonl").write_bytes(b"".join(orjson.dumps(ev) + b"\n" for ev in events))
    (folder / "state.json").write_bytes(orjson.dumps({key: {"last": first + 2}}))
    (folder / "output.log").write_bytes(b"")


def make(path: Path, flows: int = FLOWS, runs: int = RUNS) -> Layout:
    """Create (or reuse, when complete) the benchmark workspace at ``path``."""
    layout = Layout(path)
    done = path / ".flowdrop" / "bench-complete"
    if done.exists():
        return layout
    path.mkdir(parents=True, exist_ok=True)
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=path, check=True)
    for n in range(flows):
        folder = path / "flows" / f"flow_{n:02d}"
        folder.mkdir(parents=True, exist_ok=True)
        body = TICKER if n == 0 else PLAIN.format(n=n, resumable=n % 3 != 0)
        (folder / "flow.py").write_text(textwrap.dedent(body).lstrip())
    layout.ensure()
    last: dict[str, tuple[str, int]] = {}
    for n in range(runs):
        key = f"flow_{n % flows:02d}"
        previous = last.get(key)
        first = previous[1] + 3 if previous else 1
        run_id = _run_id(n)
        _record(layout.runs, run_id, key, first, previous[0] if previous else None)
        last[key] = (run_id, first)
    index.rebuild(layout)  # the engine's own scan writes the index from these records
    describe(layout, discover(layout))  # a warm describe cache, as after any earlier visit
    ids = list_run_ids(layout)
    assert len(ids) == runs
    for run_id in (ids[0], ids[len(ids) // 2], ids[-1]):
        assert load_run(layout, run_id).status == Status.CANCELLED
    done.write_text("ok\n")
    return layout


if __name__ == "__main__":
    made = make(Path(sys.argv[1]))
    print(f"{made.workspace}: {FLOWS} flows, {len(list_run_ids(made))} runs")
