"""Benchmark and acceptance check for ``prune`` (SPEC §16; docs/decisions.md,
"Retention (prune, pin)").

Makes a workspace of N runs over 50 flows, written as the engine writes them
(``cycle.jsonl`` lines, ``state.json``, ``output.log``, a ``sessions/`` link to a
``command`` transcript under ``.flowdrop/transcripts`` for every 10th run), with
what the keep rules must see: nested calls (``flow_01`` called ``inner_01`` in
its early runs only, so ``inner_01``'s pick-up run is old), paused and
interrupted runs, pinned runs, orphaned transcripts. The index is built by the
engine's own scan. Then:

* the pick-up answer (``plan.plan``) of every key is taken before the prune;
* ``retention.prune(layout, keep=20)`` is timed (a cold ledger: every run's first
  and last lines are read once; the records of the runs deleted are read again);
* what is left must be exactly what the rules say, worked out here from how the
  workspace was made (not by asking the code under test); the pick-up answer of
  every key must be unchanged; the index must equal a fresh scan of the records;
* a second prune (nothing to delete) and the workspace size (the ``flows``
  footer) are timed too.

Done at two scales, the cost is compared per run deleted: the goal is a ratio of
about 1 (time proportional to what is deleted, not to what is left).

    python bench/prune.py                    # 10,000 vs 100,000 runs
    python bench/prune.py --quick            # 2,000 vs 6,000 (smoke test)
    python bench/prune.py --runs 100000 --only   # one scale, the acceptance check
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson

from flowdrop_tui.core import retention
from flowdrop_tui.core.files.atomic import write_atomic
from flowdrop_tui.core.paths import Layout
from flowdrop_tui.core.records.listing import index, ledger
from flowdrop_tui.core.records.run_record import trash
from flowdrop_tui.core.records.run_record.run_fold import list_run_ids
from flowdrop_tui.core.run import start_plan

sys.path.insert(0, str(Path(__file__).resolve().parent))
from ui_workspace import created_event, stamp

FLOWS = 50
KEEP = 20
GOAL = 1.5  # proportional to what is deleted: about 1, with the shared disk's noise


def _run_id(n: int) -> str:
    day, rest = divmod(n, 86_400 // 8)
    seconds = rest * 8
    return (
        f"2025{1 + day // 28 % 12:02d}{1 + day % 28:02d}T{seconds // 3600:02d}"
        f"{seconds // 60 % 60:02d}{seconds % 60:02d}.000Z-{n:06x}"
    )


def _write_run(
    layout: Layout,
    run_id: str,
    key: str,
    first: int,
    source: str | None,
    *,
    ending: str,
    call: str | None,
    transcript: bool,
) -> None:
    folder = layout.runs / run_id
    os.makedirs(folder / "sessions")
    os.mkdir(folder / "requests")
    created = created_event(run_id, key, first, source)
    evs: list[dict[str, Any]] = [created, {"t": stamp(run_id, 0), "event": "started", "pid": 1}]
    for number in (first, first + 1):
        evs.append({"t": stamp(run_id, 1), "event": "round_started", "key": key, "round": number})
        if call is not None and number == first:
            evs.append(
                {"t": stamp(run_id, 1), "event": "call_started", "key": call, "first_round": 1}
            )
            evs.append({"t": stamp(run_id, 1), "event": "call_ended", "key": call})
        if transcript and number == first:
            name = f"{run_id}-000001"
            (layout.transcripts / f"{name}.log").write_bytes(b"make check\nok\n" * 20)
            os.symlink(
                f"../../../transcripts/{name}.log", folder / "sessions" / "000001-command.log"
            )
            evs.append(
                {
                    "t": stamp(run_id, 1),
                    "event": "session_opened",
                    "session": name,
                    "backend": "command",
                    "link": "sessions/000001-command.log",
                    "target": str(layout.transcripts / f"{name}.log"),
                    "key": key,
                    "round": number,
                }
            )
        evs.append(
            {
                "t": stamp(run_id, 2),
                "event": "round_ended",
                "key": key,
                "round": number,
                "outcome": "ok",
            }
        )
    if ending == "paused":
        position = {"currentNodeId": "", "iterationCount": 2, "iterator": None}
        evs.append({"t": stamp(run_id, 3), "event": "paused", "position": position})
    elif ending == "cancelled":
        evs.append(
            {"t": stamp(run_id, 3), "event": "ended", "outcome": "cancelled", "round": first + 1}
        )
    # "interrupted": the record stops mid-run and no process holds it
    (folder / "cycle.jsonl").write_bytes(b"".join(orjson.dumps(e) + b"\n" for e in evs))
    state: dict[str, Any] = {key: {"last": first + 1}}
    if call is not None:
        state[call] = {"called_by": run_id}
    (folder / "state.json").write_bytes(orjson.dumps(state))
    (folder / "output.log").write_bytes(b"")


class Generator:
    """Writes runs into a workspace and knows, from how it wrote them, what the keep
    rules must leave: it never asks the code under test."""

    def __init__(self, path: Path, flows: int = FLOWS, *, call_until: int = 0) -> None:
        self.layout = Layout(path)
        self.flows = flows
        self.call_until = call_until  # flow_01 calls inner_01 in runs numbered below this
        self.n = 0
        self.by_flow: dict[str, list[str]] = {}
        self.holders: dict[str, str] = {}  # key -> the last run holding its state
        self.always: set[str] = set()  # pinned and paused runs
        self.last: dict[str, tuple[str, int]] = {}
        path.mkdir(parents=True)
        subprocess.run(["git", "init", "-q", "-b", "main"], cwd=path, check=True)
        for n in range(flows):
            (path / "flows" / f"flow_{n:02d}").mkdir(parents=True)
            (path / "flows" / f"flow_{n:02d}" / "flow.py").write_text(
                "from flowdrop_tui import flow\n\n@flow(resumable=True)\ndef main(run):\n    pass\n"
            )
        self.layout.ensure()
        self.layout.transcripts.mkdir()
        self.layout.pins.mkdir()

    def add(self, runs: int) -> None:
        """``runs`` more runs, round robin over the flows; then the index, as the engine
        would have left it (its own scan)."""
        layout = self.layout
        for _ in range(runs):
            n = self.n
            self.n += 1
            key = f"flow_{n % self.flows:02d}"
            previous = self.last.get(key)
            first = previous[1] + 2 if previous else 1
            run_id = _run_id(n)
            ending = "cancelled"
            if n % 997 == 5:
                ending = "interrupted"  # ended: deletable like any other
            elif n % 4999 == 7:
                ending = "paused"  # never deleted
                self.always.add(run_id)
            call = "inner_01" if key == "flow_01" and n < self.call_until else None
            _write_run(
                layout,
                run_id,
                key,
                first,
                previous[0] if previous else None,
                ending=ending,
                call=call,
                transcript=n % 10 == 0,
            )
            if n % 1999 == 11:
                (layout.pins / run_id).touch()
                self.always.add(run_id)
            self.by_flow.setdefault(key, []).append(run_id)
            self.holders[key] = run_id
            if call is not None:
                self.holders[call] = run_id
            self.last[key] = (run_id, first)
        write_atomic(layout.index, orjson.dumps(index._scan(layout), option=orjson.OPT_INDENT_2))

    def orphans(self, count: int) -> None:
        """Transcripts of runs deleted by hand long ago."""
        for n in range(count):
            name = f"20200101T00{n // 60 % 60:02d}{n % 60:02d}.000Z-{n:06x}-000001.log"
            (self.layout.transcripts / name).write_bytes(b"x")

    def keep(self, keep: int) -> set[str]:
        """What ``prune --keep keep`` must leave of the runs written."""
        kept = set(self.always) | set(self.holders.values())
        for ids in self.by_flow.values():
            kept.update(ids[-keep:] if keep else [])
        return kept

    def forget_gone(self) -> None:
        """Follow the deletions: only runs still on disk count among a flow's newest."""
        present = set(list_run_ids(self.layout))
        for key, ids in self.by_flow.items():
            self.by_flow[key] = [r for r in ids if r in present]


def make(path: Path, runs: int) -> tuple[Layout, set[str]]:
    """The workspace, and the run ids the keep rules must leave (worked out here)."""
    made = Generator(path, call_until=runs // 3)
    made.add(runs)
    made.orphans(5)
    return made.layout, made.keep(KEEP)


def plans(layout: Layout) -> dict[str, tuple[Any, ...]]:
    out = {}
    for key in sorted(index.load(layout)["keys"]):
        p = start_plan.plan(layout, key, resumable=True)
        out[key] = (p.start, p.source, p.source_status, p.first_round, p.state, p.resume)
    return out


def measure(root: Path, runs: int) -> dict[str, Any]:
    began = time.perf_counter()
    layout, expected = make(root / f"ws-{runs}", runs)
    made = time.perf_counter() - began
    before = plans(layout)
    # The engine syncs each record as it writes it; the generator does not. Written out
    # now, so the prune's own sync (it is durable when it reports) is not charged with
    # flushing the whole generated workspace.
    os.sync()
    t0, c0 = time.perf_counter(), time.process_time()
    result = retention.prune(layout, KEEP)
    seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
    left = set(list_run_ids(layout))
    problems = []
    if left != expected:
        problems.append(
            f"left {len(left)} runs, the rules say {len(expected)}: "
            f"{sorted(left - expected)[:5]} should be gone, {sorted(expected - left)[:5]} kept"
        )
    after = plans(layout)
    changed = [key for key in before if before[key] != after.get(key)]
    if changed or set(before) != set(after):
        problems.append(f"the pick-up answer changed for {changed[:5]}")
    if index.read(layout) != index._scan(layout):
        problems.append("the index differs from a fresh scan of the records")
    orphans = [n for n in os.listdir(layout.transcripts) if n[:27] not in left]
    if orphans:
        problems.append(f"{len(orphans)} transcripts of no run are left: {orphans[:3]}")
    if trash.leftovers(layout):
        problems.append("the trash is not empty")
    t1 = time.perf_counter()
    again = retention.prune(layout, KEEP)
    second = time.perf_counter() - t1
    if again.deleted:
        problems.append(f"a second prune deleted {len(again.deleted)} more")
    t2 = time.perf_counter()
    used = ledger.workspace_usage(layout)
    usage_s = time.perf_counter() - t2
    deleted = len(result.deleted)
    return {
        "runs": runs,
        "keys": len(before),
        "deleted": deleted,
        "kept": len(left),
        "orphans_removed": len(result.orphans_removed),
        "seconds": round(seconds, 3),
        "us_per_deleted_run": round(seconds / max(deleted, 1) * 1e6, 1),
        "cpu_seconds": round(cpu, 3),
        "cpu_us_per_deleted_run": round(cpu / max(deleted, 1) * 1e6, 1),
        "second_prune_s": round(second, 4),
        "usage_s": round(usage_s, 4),
        "usage": {"runs": used.runs, "bytes": used.bytes},
        "made_in_s": round(made, 1),
        "problems": problems,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, nargs="*", default=None, help="the scales")
    parser.add_argument("--quick", action="store_true", help="2,000 vs 6,000 runs")
    parser.add_argument("--dir", type=Path, default=None, help="where the workspaces go")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    scales = args.runs or ([2_000, 6_000] if args.quick else [10_000, 100_000])
    root = Path(tempfile.mkdtemp(prefix="prune-bench-", dir=args.dir))
    try:
        found = [measure(root, n) for n in scales]
    finally:
        shutil.rmtree(root, ignore_errors=True)
    ratio = found[-1]["us_per_deleted_run"] / found[0]["us_per_deleted_run"]
    cpu_ratio = found[-1]["cpu_us_per_deleted_run"] / max(found[0]["cpu_us_per_deleted_run"], 0.1)
    figures = {
        "scales": found,
        "ratio_per_deleted_run": round(ratio, 2),
        "cpu_ratio_per_deleted_run": round(cpu_ratio, 2),
    }
    if args.json:
        print(orjson.dumps(figures, option=orjson.OPT_INDENT_2).decode())
    else:
        for f in found:
            print(
                f"{f['runs']:>7,} runs ({f['keys']} keys): deleted {f['deleted']:,} in "
                f"{f['seconds']} s = {f['us_per_deleted_run']} µs per run "
                f"(CPU {f['cpu_us_per_deleted_run']} µs); kept {f['kept']:,}; "
                f"a second prune {f['second_prune_s']} s; workspace size {f['usage_s']} s; "
                f"{'OK' if not f['problems'] else 'PROBLEMS: ' + '; '.join(f['problems'])}"
            )
        if len(found) > 1:
            scale = f"{found[-1]['runs']:,} vs {found[0]['runs']:,} runs"
            verdict = "met" if ratio <= GOAL else "NOT met"
            print(f"ratio (time per deleted run, {scale}): {ratio:.2f} — goal <= {GOAL}: {verdict}")
            print(f"CPU time per deleted run, the same: {cpu_ratio:.2f} (load moves it less)")
    return 1 if any(f["problems"] for f in found) else 0


if __name__ == "__main__":
    sys.exit(main())
