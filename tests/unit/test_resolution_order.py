"""SPEC §7 in-process: where a run's starting state comes from, in its fixed order
(``--snapshot``, ``--resume``, ``--from``, the thread's latest state, fresh), over
records seeded as the engine writes them — no child process, no server.

The same rules end to end, through the real command: tests/core/test_picking_up.py."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import orjson
import pytest

from flowdrop_tui.core.errors import (
    AlreadyRunningError,
    FlowdropError,
    NotResumableError,
    TerminalSnapshotError,
    UsageError,
    exit_code,
)
from flowdrop_tui.core.paths import REMOTE_LIVE, Layout
from flowdrop_tui.core.run.start_plan import plan
from tests.seeded_records import reindex, seed_run

OLD = "20260817T010000.000Z-aaaaaa"
MID = "20260817T020000.000Z-bbbbbb"
NEW = "20260817T030000.000Z-cccccc"


def append(ws: Path, run_id: str, *lines: dict[str, Any]) -> None:
    path = ws / ".flowdrop" / "runs" / run_id / "cycle.jsonl"
    with path.open("ab") as handle:
        for line in lines:
            handle.write(orjson.dumps({"t": "2026-08-17T05:00:00.000Z", **line}) + b"\n")


def paused(ws: Path, run_id: str, at_round: int) -> None:
    """The run's record ends with a pause after round ``at_round``, mid-loop."""
    position = {"currentNodeId": "", "iterationCount": at_round, "iterator": 2}
    append(ws, run_id, {"event": "paused", "round": at_round, "position": position})


def held_elsewhere(ws: Path, run_id: str) -> None:
    """The run is live: a replica's marker names its holder (pid 1: never signalled)."""
    marker = {"pid": 1, "host": "elsewhere", "worker": "w", "key": "k", "epoch": 1, "since": 0}
    (ws / ".flowdrop" / "runs" / run_id / REMOTE_LIVE).write_bytes(orjson.dumps(marker))


def chain(ws: Path, mid: str | None = "cancelled", new: str | None = "cancelled") -> Layout:
    """Three runs of key ``k``: rounds 1–3, 4–6, 7–9, each state naming its run; the
    outcomes of the last two as given (``None``: not ended)."""
    seed_run(ws, OLD, "k", first_round=1, last_round=3, state={"by": "old"}, minute=0)
    seed_run(
        ws,
        MID,
        "k",
        first_round=4,
        last_round=6,
        outcome=mid,
        source=OLD,
        state={"by": "mid"},
        minute=1,
    )
    seed_run(
        ws,
        NEW,
        "k",
        first_round=7,
        last_round=9,
        outcome=new,
        source=MID,
        state={"by": "new"},
        minute=2,
    )
    reindex(ws)
    return Layout(ws)


def snapshot_file(tmp_path: Path, status: str | None, data: dict[str, Any]) -> Path:
    path = tmp_path / "snap.json"
    shape = {
        "runId": OLD,
        "threadId": "k",
        "status": status,
        "isComplete": status in ("completed", "failed", "cancelled"),
        "error": None,
        "data": data,
        "metadata": {"round": 40, "pickedUpFrom": None},
        "messages": [],
        "currentNodeId": "",
        "iterationCount": 0,
        "iterator": None,
    }
    path.write_bytes(orjson.dumps(shape))
    return path


def test_step_4_picks_up_the_threads_latest_state_one_round_past_it(tmp_path: Path) -> None:
    """Guards step 4 and the round chain: the newest run's state, its last round + 1."""
    layout = chain(tmp_path)
    got = plan(layout, "k", resumable=True)
    assert (got.start, got.source, got.state, got.first_round) == ("thread", NEW, {"by": "new"}, 10)
    assert got.source_status == "cancelled" and got.resume is None


def test_step_4_looks_past_runs_that_never_wrote_the_key(tmp_path: Path) -> None:
    """Guards "runs that never wrote the key are looked past": the newest run holds
    only another key's state, so the run before it is the source."""
    layout = chain(tmp_path)
    (layout.runs / NEW / "state.json").write_bytes(orjson.dumps({"other": {"x": 1}}))
    got = plan(layout, "k", resumable=True)
    assert (got.source, got.state, got.first_round) == (MID, {"by": "mid"}, 7)


def test_step_4_stops_at_a_run_that_emptied_its_state(tmp_path: Path) -> None:
    """Guards SPEC §5.5: an emptied state stops the search; the chain goes on from it."""
    layout = chain(tmp_path)
    (layout.runs / NEW / "state.json").write_bytes(orjson.dumps({"k": {}}))
    got = plan(layout, "k", resumable=True)
    assert (got.source, got.state, got.first_round) == (NEW, {}, 10)


def test_step_4_resumes_a_paused_latest_run_in_its_own_record(tmp_path: Path) -> None:
    """Guards SG-12 clause 3: a paused run is continued untouched, never seeded from."""
    layout = chain(tmp_path, new=None)
    paused(tmp_path, NEW, 8)
    got = plan(layout, "k", resumable=True)
    assert (got.resume, got.source_status) == (NEW, "paused")
    assert got.state == {}  # nothing seeded: the run reads its own record as it continues


def test_step_4_refuses_a_live_latest_run_naming_it(tmp_path: Path) -> None:
    """Guards "a run that is still live is never seeded from"."""
    seed_run(tmp_path, OLD, "k", state={"by": "old"})
    seed_run(tmp_path, NEW, "k", first_round=4, last_round=5, outcome=None, minute=2)
    held_elsewhere(tmp_path, NEW)
    reindex(tmp_path)
    with pytest.raises(AlreadyRunningError, match=NEW):
        plan(Layout(tmp_path), "k", resumable=True)


def test_fresh_and_a_flow_not_resumable_skip_the_thread(tmp_path: Path) -> None:
    """Guards step 5: ``--fresh``, or a flow without ``resumable=True``, starts at round 1."""
    layout = chain(tmp_path)
    for got in (plan(layout, "k", resumable=True, fresh=True), plan(layout, "k", resumable=False)):
        assert (got.start, got.source, got.state, got.first_round) == ("fresh", None, {}, 1)


def test_step_3_from_beats_the_thread(tmp_path: Path) -> None:
    """Guards the order: ``--from OLD`` picks up OLD even though NEW is the latest."""
    layout = chain(tmp_path)
    got = plan(layout, "k", resumable=True, from_run=OLD)
    assert (got.start, got.source, got.state, got.first_round) == ("from", OLD, {"by": "old"}, 4)


def test_step_3_from_on_a_flow_not_resumable_is_refused(tmp_path: Path) -> None:
    layout = chain(tmp_path)
    with pytest.raises(NotResumableError):
        plan(layout, "k", resumable=False, from_run=OLD)


def test_step_3_from_an_unknown_run_is_an_error_never_a_fresh_start(tmp_path: Path) -> None:
    layout = chain(tmp_path)
    unknown = "20990101T000000.000Z-ffffff"
    with pytest.raises(FlowdropError, match=re.escape(f"no run {unknown}")) as caught:
        plan(layout, "k", resumable=True, from_run=unknown)
    assert exit_code(caught.value) == 2


def test_step_2_resume_of_an_ended_checkpoint_is_refused_naming_it(tmp_path: Path) -> None:
    """Guards SG-12: ``--resume`` of a run that ended is refused with its status."""
    layout = chain(tmp_path)
    with pytest.raises(TerminalSnapshotError, match=rf"{MID}.*cancelled|cancelled.*{MID}"):
        plan(layout, "k", resumable=True, resume=MID)


def test_step_2_resume_of_a_paused_checkpoint_continues_that_run(tmp_path: Path) -> None:
    """Guards step 2 before step 4: the named paused run continues, not the latest."""
    layout = chain(tmp_path, mid=None)
    paused(tmp_path, MID, 5)
    got = plan(layout, "k", resumable=True, resume=MID)
    assert (got.resume, got.source_status) == (MID, "paused")


def test_step_2_an_unresolved_checkpoint_warns_and_starts_fresh(tmp_path: Path) -> None:
    """Guards SG-12 clause 1: nothing to resume is a warning, then a fresh start."""
    layout = chain(tmp_path)
    got = plan(layout, "k", resumable=True, resume="20990101T000000.000Z-ffffff")
    assert got.start == "fresh" and got.state == {} and got.first_round == 1
    assert any("20990101T000000.000Z-ffffff" in warning for warning in got.warnings)


def test_step_1_snapshot_beats_everything_and_is_restored_untouched(tmp_path: Path) -> None:
    """Guards step 1: a snapshot's data, round 41, whatever the thread holds."""
    layout = chain(tmp_path)
    got = plan(layout, "k", resumable=True, snapshot=snapshot_file(tmp_path, None, {"s": 1}))
    assert (got.start, got.state, got.first_round) == ("snapshot", {"s": 1}, 41)


@pytest.mark.parametrize("status", ["completed", "failed", "cancelled"])
def test_step_1_a_terminal_snapshot_is_refused_before_any_run(tmp_path: Path, status: str) -> None:
    """Guards INT-14: refused naming the snapshot and its status; no run is made."""
    layout = chain(tmp_path)
    path = snapshot_file(tmp_path, status, {"s": 1})
    with pytest.raises(TerminalSnapshotError, match=status) as caught:
        plan(layout, "k", resumable=True, snapshot=path)
    assert "snap.json" in caught.value.message
    assert sorted(p.name for p in layout.runs.iterdir()) == [OLD, MID, NEW]


def test_two_sources_at_once_are_a_usage_error(tmp_path: Path) -> None:
    """Guards the fixed order's premise: one source is named, never two."""
    layout = chain(tmp_path)
    with pytest.raises(UsageError):
        plan(layout, "k", resumable=True, from_run=OLD, fresh=True)
