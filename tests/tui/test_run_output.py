"""The Run pane: how long a run ran, and what it printed (issue 11, items 4 and 5)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from textual.widgets import Static

from flowdrop_tui.core.paths import Layout
from tests.seeded_records import reindex, seed_run
from tests.tui.tui_helpers import RecordingApp, settled, until

SIZE = (120, 36)

LOOP = """
    from flowdrop_tui import flow

    @flow(resumable=True)
    def main(run):
        for round in run.rounds():
            run.state["n"] = round
"""

KILLED = "20260817T010000.000Z-aaaaaa"


def detail_text(app: RecordingApp) -> str:
    return str(app.main_screen.detail.query_one("#detail-text", Static).render())


async def test_an_interrupted_runs_duration_is_fixed_at_its_last_event(
    workspace: Path, flow_writer: Callable[[str, str], Path]
) -> None:
    """Guards against the duration of a killed run growing with the clock (months here)."""
    flow_writer("loop", LOOP)
    seed_run(workspace, KILLED, "loop", last_round=3, outcome=None)  # killed 7 s in
    reindex(workspace)
    app = RecordingApp(Layout(workspace))
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: settled(app), what="the first reads")
        runs = app.main_screen.runs
        assert runs.selected_run is not None and runs.selected_run.status == "interrupted"
        assert str(runs.get_cell(KILLED, "duration")) == "7s"
        runs.tick()  # the clock a live run's duration follows: not this one's
        await pilot.pause()
        assert str(runs.get_cell(KILLED, "duration")) == "7s"
        text = detail_text(app)
        assert "started 2026-08-17 01:00:00 · 7s" in text
        assert "last event 2026-08-17 01:00:07" in text
