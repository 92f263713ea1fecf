"""A run's record folded into what the faces show (``records/run_record/run_fold.py``): its
status — checked against liveness —, rounds, source, requests and position, read from
records seeded as the engine writes them, in this process."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from flowdrop_tui.core.paths import REMOTE_LIVE, Layout
from flowdrop_tui.core.records.run_record.run_fold import list_run_ids, load_run
from flowdrop_tui.core.records.run_record.run_info import Status
from tests.seeded_records import seed_run

RUN = "20260817T010000.000Z-aaaaaa"
NEXT = "20260817T020000.000Z-bbbbbb"


def append(ws: Path, run_id: str, *lines: dict[str, Any], raw: bytes = b"") -> None:
    with (ws / ".flowdrop" / "runs" / run_id / "cycle.jsonl").open("ab") as handle:
        for line in lines:
            handle.write(orjson.dumps({"t": "2026-08-17T01:30:00.000Z", **line}) + b"\n")
        handle.write(raw)


def test_an_ended_run_folds_to_its_outcome_rounds_and_times(tmp_path: Path) -> None:
    """Guards the fold of a whole record: outcome, the rounds range, start and end."""
    seed_run(tmp_path, RUN, "k", first_round=4, last_round=6, outcome="completed", source=NEXT)
    info = load_run(Layout(tmp_path), RUN)
    assert (info.status, info.key, info.first_round, info.last_round) == (
        Status.COMPLETED,
        "k",
        4,
        6,
    )
    assert (info.rounds, info.start, info.source) == (3, "thread", NEXT)
    assert info.started is not None and info.ended is not None and info.ended > info.started


def test_a_live_record_with_no_holder_is_interrupted(tmp_path: Path) -> None:
    """Guards reconcile-never-restart: recorded running, nobody holds it → interrupted."""
    seed_run(tmp_path, RUN, "k", outcome=None)
    assert load_run(Layout(tmp_path), RUN).status == Status.INTERRUPTED


def test_a_live_record_held_elsewhere_is_running(tmp_path: Path) -> None:
    """Guards liveness through a replica's marker: the run is running, its holder named."""
    seed_run(tmp_path, RUN, "k", outcome=None)
    marker = {"pid": 77, "host": "elsewhere", "worker": "w", "key": "k", "epoch": 1, "since": 0}
    (tmp_path / ".flowdrop" / "runs" / RUN / REMOTE_LIVE).write_bytes(orjson.dumps(marker))
    info = load_run(Layout(tmp_path), RUN)
    assert info.status == Status.RUNNING and info.live_pid == 77


def test_requests_and_a_pause_fold_into_the_run(tmp_path: Path) -> None:
    """Guards the stop and pause events: a pending stop, then a pause with its position."""
    seed_run(tmp_path, RUN, "k", outcome=None, last_round=2)
    append(tmp_path, RUN, {"event": "stop_requested", "now": False, "by": {"via": "ui"}})
    assert load_run(Layout(tmp_path), RUN).stop_pending
    position = {"currentNodeId": "", "iterationCount": 2, "iterator": 5}
    append(tmp_path, RUN, {"event": "paused", "round": 2, "position": position})
    info = load_run(Layout(tmp_path), RUN)
    assert info.status == Status.PAUSED and info.position == position


def test_a_torn_last_line_and_junk_are_not_events(tmp_path: Path) -> None:
    """Guards the reader of a record a kill cut short: whole lines only, junk skipped."""
    seed_run(tmp_path, RUN, "k", outcome=None, last_round=2)
    append(
        tmp_path, RUN, raw=b'not json\n{"t": "2026-08-17T01:31:00.000Z", "event": "ended", "outc'
    )
    info = load_run(Layout(tmp_path), RUN)
    assert info.status == Status.INTERRUPTED and info.last_round == 2


def test_runs_are_listed_oldest_first(tmp_path: Path) -> None:
    """Guards the run ids' order: the time they name (what "newest" means everywhere)."""
    seed_run(tmp_path, NEXT, "k", minute=5)
    seed_run(tmp_path, RUN, "k")
    assert list_run_ids(Layout(tmp_path)) == [RUN, NEXT]
