"""RunTracker: which runs are watched, and that an end is announced exactly once."""

from __future__ import annotations

from pathlib import Path

from flowdrop_tui.core.paths import Layout
from flowdrop_tui.core.records.run_record.run_info import RunInfo, Status
from flowdrop_tui.tui.run_tracker import GIT_EVERY, RunTracker

RUN = "20260817T010000.000Z-aaaaaa"


def info(status: Status, **fields: object) -> RunInfo:
    run = RunInfo(run=RUN, path=Path("/nowhere"), key="k", status=status)
    for name, value in fields.items():
        setattr(run, name, value)
    return run


def test_an_end_seen_after_live_is_announced_once(tmp_path: Path) -> None:
    """Guards the notifications: a run watched live, then cancelled, is told once;
    a run first seen already ended is not told at all."""
    tracker = RunTracker(Layout(tmp_path))
    assert tracker.seen(info(Status.COMPLETED)) == (False, None)  # never seen live
    assert tracker.seen(info(Status.RUNNING)) == (True, None)
    assert RUN in tracker.wanted(None)
    tracker.stop_asked.add(RUN)
    changed, notice = tracker.seen(info(Status.CANCELLED, last_round=7))
    assert changed and notice is not None
    assert notice[0] == f"run {RUN} of k stopped after round 7; enter picks it up"
    assert RUN not in tracker.stop_asked and RUN not in tracker.wanted(None)
    assert tracker.seen(info(Status.CANCELLED, last_round=7)) == (False, None)


def test_git_is_read_on_selection_and_end_but_not_every_round(tmp_path: Path) -> None:
    """Guards against a git child process per round of a fast loop."""
    tracker = RunTracker(Layout(tmp_path))
    ended_round = [{"event": "round_ended"}]
    assert tracker.git_due(RUN, [], history=True)
    assert not tracker.git_due(RUN, ended_round, history=False)  # within GIT_EVERY
    assert tracker.git_due(RUN, [{"event": "ended"}], history=False)
    assert GIT_EVERY >= 1
