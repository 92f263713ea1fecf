"""``prune``'s keep rules as a property (SPEC §16), over flows of every size from 0 to
``keep + 2`` against every ``keep`` from 0 to 6, with every mix of ended, pinned,
paused and live runs that hypothesis draws.

The records are real files written as the engine writes them (``created``,
``started``, rounds, then ``ended``, ``paused`` or nothing: interrupted, or live when
a real child process holds the run's ``live.lock``); ``retention.prune`` then deletes
for real. What must stay is worked out here from how the records were written,
never by asking the code under test.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from flowdrop_tui.core import retention
from flowdrop_tui.core.paths import LIVE_LOCK, Layout
from flowdrop_tui.core.records.run_record.run_fold import list_run_ids

KEEPS = range(0, 7)
KINDS = ("completed", "cancelled", "failed", "interrupted", "paused", "live")
# A lock holder in another process: POSIX record locks are what liveness asks of.
HOLDER = """
import fcntl, os, sys
held = []
for line in sys.stdin:
    fd = os.open(line.strip(), os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    held.append(fd)
    print("held", flush=True)
"""


@dataclass(frozen=True)
class Drawn:
    kind: str
    pinned: bool
    fresh: bool  # started fresh past the head (an unresolved --resume records `replaced`)


def _run_id(n: int) -> str:
    return f"20260101T{n // 3600:02d}{n // 60 % 60:02d}{n % 60:02d}.000Z-{n:06x}"


def _t(n: int, second: int) -> str:
    total = n + second
    return f"2026-01-01T{total // 3600:02d}:{total // 60 % 60:02d}:{total % 60:02d}.000Z"


def _record(
    layout: Layout, n: int, key: str, source: str | None, replaced: str | None, drawn: Drawn
) -> str:
    run_id = _run_id(n)
    folder = layout.runs / run_id
    os.makedirs(folder / "sessions")
    created: dict[str, Any] = {
        "t": _t(n, 0),
        "event": "created",
        "v": 1,
        "run": run_id,
        "key": key,
        "flow": f"flows/{key}",
        "start": "thread" if source else "fresh",
        "source": source,
        "source_status": "completed" if source else None,
        "snapshot": None,
        "first_round": 1,
        "resumable": True,
        "pid": 1,
        "pgid": 1,
        "host": "test",
        "git": None,
    }
    if replaced is not None:
        created["replaced"] = replaced  # as an unresolved --resume records it
    evs = [created, {"t": _t(n, 0), "event": "started", "pid": 1, "pgid": 1}]
    evs.append({"t": _t(n, 0), "event": "round_started", "key": key, "round": 1})
    evs.append({"t": _t(n, 1), "event": "round_ended", "key": key, "round": 1, "outcome": "ok"})
    if drawn.kind == "paused":
        position = {"currentNodeId": "", "iterationCount": 1, "iterator": None}
        evs.append({"t": _t(n, 1), "event": "paused", "position": position})
    elif drawn.kind in ("completed", "cancelled", "failed"):
        evs.append({"t": _t(n, 1), "event": "ended", "outcome": drawn.kind, "round": 1})
    (folder / "cycle.jsonl").write_bytes(b"".join(orjson.dumps(e) + b"\n" for e in evs))
    (folder / "state.json").write_bytes(orjson.dumps({key: {"n": n}}))
    (folder / "output.log").write_bytes(b"")
    if drawn.pinned:
        (layout.pins / run_id).touch()
    return run_id


@contextmanager
def _holding(paths: list[Path]) -> Iterator[None]:
    """A real child process holds each path's lock until the block ends."""
    if not paths:
        yield
        return
    child = subprocess.Popen(
        [sys.executable, "-c", HOLDER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert child.stdin is not None and child.stdout is not None
    try:
        for path in paths:
            child.stdin.write(f"{path}\n")
            child.stdin.flush()
            assert child.stdout.readline().strip() == "held"
        yield
    finally:
        child.kill()
        child.wait()


def _flows(keep: int) -> st.SearchStrategy[list[list[Drawn]]]:
    """One flow of every size from 0 to keep + 2, each run drawn."""
    run = st.builds(
        Drawn,
        kind=st.sampled_from(KINDS),
        pinned=st.booleans(),
        fresh=st.booleans(),
    )
    return st.tuples(*[st.lists(run, min_size=size, max_size=size) for size in range(keep + 3)])


def _check(keep: int, flows: list[list[Drawn]], include_replaced: bool) -> None:
    root = Path(tempfile.mkdtemp(prefix="prune-prop-"))
    try:
        layout = Layout(root)
        layout.ensure()
        layout.pins.mkdir()
        must_stay: set[str] = set()
        every: list[str] = []
        expected_replaced: set[str] = set()
        live: list[Path] = []
        n = 0
        for size, runs in enumerate(flows):
            key = f"f{size}"
            (root / "flows" / key).mkdir(parents=True)
            (root / "flows" / key / "flow.py").write_text(
                "from flowdrop_tui import flow\n\n@flow(resumable=True)\ndef main(run):\n    pass\n"
            )
            ids: list[str] = []
            head: str | None = None
            for drawn in runs:
                n += 1
                # a fresh start leaves the run before it without picking it up
                source = None if drawn.fresh else head
                replaced = head if drawn.fresh else None
                run_id = _record(layout, n, key, source, replaced, drawn)
                if replaced is not None:
                    expected_replaced.add(replaced)  # nothing picks it up after a fresh start
                    if not include_replaced:
                        must_stay |= {replaced, run_id}  # and the record that says so
                ids.append(run_id)
                head = run_id
                if drawn.kind in ("paused", "live") or drawn.pinned:
                    must_stay.add(run_id)
                if drawn.kind == "live":
                    live.append(layout.runs / run_id / LIVE_LOCK)
            every += ids
            must_stay.update(ids[-keep:] if keep else [])  # the newest `keep`, or all
            if ids:
                must_stay.add(ids[-1])  # its key's head: last run and pick-up source
        with _holding(live):
            plan = retention.plan_prune(layout, keep, include_replaced=include_replaced)
            assert {v.run for v in plan.kept} >= must_stay, (
                "prune would delete runs the rules keep",
                sorted(must_stay - {v.run for v in plan.kept}),
            )
            newest = {v.run for v in plan.kept if retention.Why.NEWEST in v.reasons}
            expected_newest: set[str] = set()
            start = 0
            for runs in flows:
                ids = every[start : start + len(runs)]
                start += len(runs)
                expected_newest.update(ids[-keep:] if keep else [])
            assert newest == expected_newest
            replaced = {v.run for v in plan.kept if retention.Why.REPLACED in v.reasons}
            assert replaced == (set() if include_replaced else expected_replaced)
            result = retention.prune(layout, keep, include_replaced=include_replaced)
            left = set(list_run_ids(layout))
        assert left == must_stay, (sorted(left - must_stay), sorted(must_stay - left))
        assert {v.run for v in result.deleted} == set(every) - must_stay
    finally:
        shutil.rmtree(root, ignore_errors=True)


@pytest.mark.parametrize("keep", KEEPS)
def test_prune_keeps_exactly_what_the_rules_keep_for_every_flow_size(keep: int) -> None:
    """Guards SPEC §16's "the newest N runs of each flow (and all of them when it has
    fewer)" with live, paused and pinned runs, each key's head and the heads a fresh
    start looked past (``replaced``, unless ``--include-replaced``): flows of 0 to
    ``keep + 2`` runs, in one workspace, for each ``keep``."""

    @settings(
        max_examples=12,
        deadline=None,
        # each example is a workspace on disk: a failure is shown as drawn, not shrunk
        phases=[Phase.explicit, Phase.reuse, Phase.generate],
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(flows=_flows(keep), include_replaced=st.booleans())
    def check(flows: list[list[Drawn]], include_replaced: bool) -> None:
        _check(keep, list(flows), include_replaced)

    check()
