"""A run's duration is its running time, fixed once it stopped (docs/decisions.md,
"Listing").

An interrupted run recorded no end: its duration grew with the clock forever
(``runs`` showed ``6m01s`` minutes after a ``kill -9`` of a run that lived 25 s).
It now runs up to its last event; a paused run up to its pause; an ended run up
to its end — in ``runs``, ``show`` and their ``--json``.
"""

from __future__ import annotations

import os
import signal
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import orjson

from flowdrop_tui.core.paths import Layout
from flowdrop_tui.core.records.run_record.run_fold import load_run
from flowdrop_tui.core.records.run_record.run_info import Status
from flowdrop_tui.format import duration
from tests.conftest import CLI, events, wait_for, write_flow
from tests.flow_bodies import counts_rounds
from tests.seeded_records import reindex, seed_run

LOOP = counts_rounds("round", sleep=0.1)

KILLED = "20260817T010000.000Z-aaaaaa"  # seeded: created 01:00:00, last event 01:00:07


def stamp(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def row_of(cli: CLI, run_id: str) -> dict[str, object]:
    rows = cli.json("runs")
    return next(row for row in rows if row["run"] == run_id)


def text_cell(cli: CLI, run_id: str, column: int) -> str:
    line = next(ln for ln in cli("runs", check=0).stdout.splitlines() if ln.startswith(run_id))
    return line.split()[column]


def test_a_killed_run_keeps_the_duration_it_ran_however_long_after(
    workspace: Path, cli: CLI
) -> None:
    """A real ``kill -9``: the duration stops at the run's last event and stays there."""
    write_flow(workspace, "loop", LOOP)
    run_id = cli.json("run", "loop", "--detach")["run"]
    wait_for(lambda: sum(e["event"] == "round_started" for e in events(workspace, run_id)) >= 12)
    pid = cli.json("show", run_id)["pid"]
    os.killpg(pid, signal.SIGKILL)
    wait_for(lambda: cli.json("show", run_id)["status"] == "interrupted")
    evs = events(workspace, run_id)
    ran = (stamp(evs[-1]["t"]) - stamp(evs[0]["t"])).total_seconds()
    # Long enough after the kill that a duration still counting would show it.
    wait_for(lambda: datetime.now(UTC) - stamp(evs[-1]["t"]) > timedelta(seconds=2.5), timeout=10)
    row = row_of(cli, run_id)
    assert row["status"] == "interrupted" and row["ended"] is None
    assert row["duration"] == round(ran, 3)
    assert text_cell(cli, run_id, 6) == duration(ran)  # RUN FLOW STATUS ROUNDS DATE TIME DUR
    time.sleep(1.1)
    assert row_of(cli, run_id)["duration"] == round(ran, 3)
    shown = cli("show", run_id, check=0).stdout
    assert f"(ran {duration(ran)}, up to its last event)" in shown
    assert cli.json("show", run_id)["duration"] == round(ran, 3)


def test_a_seeded_interrupted_run_lasts_until_its_last_event(workspace: Path, cli: CLI) -> None:
    """A record from August, killed 7 s in: 7 s, not the months since."""
    seed_run(workspace, KILLED, "loop", last_round=3, outcome=None)
    reindex(workspace)
    info = load_run(Layout(workspace), KILLED)
    assert info.status == Status.INTERRUPTED
    assert info.stopped_at == "2026-08-17T01:00:07.000Z"
    assert info.seconds() == 7.0
    assert info.seconds(datetime(2030, 1, 1, tzinfo=UTC)) == 7.0
    assert row_of(cli, KILLED)["duration"] == 7.0
    assert text_cell(cli, KILLED, 6) == "7s"


def test_a_paused_run_lasts_until_its_pause(workspace: Path, cli: CLI) -> None:
    seed_run(workspace, KILLED, "loop", last_round=2, outcome=None)
    cycle = workspace / ".flowdrop" / "runs" / KILLED / "cycle.jsonl"
    paused = {"t": "2026-08-17T01:00:09.500Z", "event": "paused", "position": {}, "round": 2}
    with open(cycle, "ab") as handle:
        handle.write(orjson.dumps(paused) + b"\n")
    reindex(workspace)
    row = row_of(cli, KILLED)
    assert row["status"] == "paused" and row["duration"] == 9.5
    assert text_cell(cli, KILLED, 6) == "9s"


def test_an_ended_run_lasts_until_its_end_and_a_torn_last_line_is_not_an_event(
    workspace: Path, cli: CLI
) -> None:
    seed_run(workspace, KILLED, "loop", last_round=3, outcome="completed")
    info = load_run(Layout(workspace), KILLED)
    assert info.ended == info.stopped_at == "2026-08-17T01:00:08.000Z"
    assert info.seconds() == 8.0
    cycle = workspace / ".flowdrop" / "runs" / KILLED / "cycle.jsonl"
    with open(cycle, "ab") as handle:
        handle.write(b'{"t": "2026-08-17T09:00:00.000Z", "event": "lo')  # torn by a kill
    assert load_run(Layout(workspace), KILLED).seconds() == 8.0
    assert "(ran 8s)" in cli("show", KILLED, check=0).stdout


def test_a_record_without_times_has_no_duration(workspace: Path, cli: CLI) -> None:
    """A damaged record: no start time, no duration — never a crash or a made-up one."""
    folder = workspace / ".flowdrop" / "runs" / KILLED
    folder.mkdir(parents=True)
    (folder / "cycle.jsonl").write_bytes(
        b'{"event": "created", "key": "loop", "t": "not a time"}\n{"event": "started", "t": 5}\n'
    )
    info = load_run(Layout(workspace), KILLED)
    assert info.seconds() is None and info.stopped_at == "not a time"
    assert row_of(cli, KILLED)["duration"] is None
    assert duration(None) == ""
