"""Issue 26 item 7: a run's duration counted its paused time while the minutes budget
did not (32.5 s against 24 s). The run pane names both: the time it ran, which the
budget counts, and the wall-clock time since it started."""

from __future__ import annotations

from pathlib import Path

import orjson

from flowdrop_tui.core.paths import Layout
from flowdrop_tui.core.records.run_record.run_fold import load_run
from flowdrop_tui.format import run_times
from tests.seeded_records import reindex, seed_run
from tests.tui.tui_helpers import RecordingApp, settled, until

RUN = "20260817T010000.000Z-a1b2c3"
FLOW = """
from flowdrop_tui import flow

@flow(resumable=True)
def main(run):
    for round in run.rounds():
        run.state["n"] = round
"""


def paused_for_half_a_minute(ws: Path) -> None:
    """Ran 01→05 (round 1), paused 05→35, resumed 35→41 (round 2), completed:
    10 s of running, 41 s of wall clock from its creation (00)."""
    folder = ws / "flows" / "tally"
    folder.mkdir(parents=True)
    (folder / "flow.py").write_text(FLOW)
    seed_run(ws, RUN, "tally", last_round=1, outcome=None)
    later = [
        {"t": "2026-08-17T01:00:05.000Z", "event": "paused", "round": 1},
        {"t": "2026-08-17T01:00:35.000Z", "event": "resumed", "pid": 4243, "pgid": 4243},
        {"t": "2026-08-17T01:00:36.000Z", "event": "round_started", "key": "tally", "round": 2},
        {
            "t": "2026-08-17T01:00:38.000Z",
            "event": "round_ended",
            "key": "tally",
            "round": 2,
            "outcome": "ok",
            "seconds": 2.0,
        },
        {
            "t": "2026-08-17T01:00:41.000Z",
            "event": "ended",
            "outcome": "completed",
            "result": None,
            "error": None,
            "git": None,
            "round": 2,
        },
    ]
    with (ws / ".flowdrop" / "runs" / RUN / "cycle.jsonl").open("ab") as log:
        log.write(b"".join(orjson.dumps(ev) + b"\n" for ev in later))
    reindex(ws)


def test_the_words_name_both_times() -> None:
    assert run_times(24.2, 32.5) == "running 24s · wall 32s"
    assert run_times(None, 75) == "wall 1m15s"


async def test_the_run_pane_names_running_and_wall_time_at_80x24(layout: Layout) -> None:
    paused_for_half_a_minute(layout.workspace)
    info = load_run(layout, RUN)
    assert info.own_used().seconds == 10.0 and info.seconds() == 41.0
    app = RecordingApp(layout)
    async with app.run_test(size=(80, 24)) as pilot:
        main = app.main_screen
        await until(pilot, lambda: main.selected_run == RUN, what="the run selected")
        await until(pilot, lambda: settled(app), what="the run shown")
        assert "time    running 10s · wall 41s" in main.detail.plain_text
