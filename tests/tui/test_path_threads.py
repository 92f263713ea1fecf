"""Issue 26 item 1 in the UI: a thread run by path (``run flows/tick/``) is a row of its
own — listed under its key, counted in the top line while it runs, selectable like any
flow row, and stoppable with escape. A real detached run in a real workspace."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from flowdrop_tui.core.paths import Layout
from flowdrop_tui.core.records.run_record.run_fold import load_run
from flowdrop_tui.core.records.run_record.run_info import ENDED, Status
from flowdrop_tui.tui.screens.pick_up_modal import PickUpModal, describe_plan
from flowdrop_tui.tui.widgets.workspace_bar import WorkspaceBar
from tests.conftest import CLI, events
from tests.flow_bodies import counts_rounds
from tests.tui.tui_helpers import RecordingApp, until

SIZE = (120, 36)


async def test_a_thread_run_by_path_is_its_own_row_counted_and_stoppable(
    layout: Layout, flow_writer: Callable[[str, str], Path]
) -> None:
    flow_writer("tick", counts_rounds(sleep=0.2, description="a round every 0.2 s"))
    cli = CLI(layout.workspace)
    run_id = str(cli.json("run", "flows/tick/", "--detach")["run"])
    app = RecordingApp(layout)
    async with app.run_test(size=SIZE) as pilot:
        main = app.main_screen
        await until(pilot, lambda: "flows/tick" in main.flows.rows_by_name, what="the path's row")
        assert "tick" in main.flows.rows_by_name  # the name's thread keeps its own row
        bar = main.query_one(WorkspaceBar)
        await until(pilot, lambda: "running: flows/tick" in bar.summary, what="the top line")
        await until(pilot, lambda: main.flows.selected_name == "tick", what="the first row")
        await pilot.press("down")
        await until(
            pilot, lambda: main.flows.selected_name == "flows/tick", what="the row selected"
        )
        await until(pilot, lambda: main.selected_run == run_id, what="its live run selected")
        await pilot.press("escape")
        await until(pilot, lambda: load_run(layout, run_id).status in ENDED, what="its end")
        assert load_run(layout, run_id).status == Status.CANCELLED
        stops = [ev for ev in events(layout.workspace, run_id) if ev["event"] == "stop_requested"]
        assert stops and stops[0]["by"]["via"] == "ui", stops
        await until(
            pilot,
            lambda: str(main.flows.get_cell("flows/tick", "status")) == "cancelled",
            what="the row's status",
        )
        await until(pilot, lambda: "flows/tick" not in bar.summary, what="the top line")


async def test_a_broken_flows_run_pane_says_why_it_cannot_run(
    layout: Layout, flow_writer: Callable[[str, str], Path]
) -> None:
    """Issue 26 (smaller): a broken flow's empty run pane said "enter runs it"; it says
    why it cannot run and how to open it. A flow that loads still says enter runs it."""
    flow_writer("alpha", counts_rounds())
    flow_writer("broken", "from flowdrop_tui import flow\n\ndef main(run)\n    pass\n")
    app = RecordingApp(layout)
    async with app.run_test(size=SIZE) as pilot:
        main = app.main_screen
        await until(
            pilot,
            lambda: main.flows.rows_by_name.get("broken", {}).get("error"),
            what="the broken flow described",
        )
        await until(pilot, lambda: "enter runs it" in main.detail.empty_text, what="alpha's pane")
        await pilot.press("down")
        await until(
            pilot, lambda: "cannot be loaded" in main.detail.empty_text, what="broken's pane"
        )
        assert "enter runs it" not in main.detail.empty_text
        assert "flows/broken/flow.py:3" in main.detail.empty_text


async def test_the_pick_up_preview_of_an_older_run_says_it_forks_naming_the_newest(
    layout: Layout, flow_writer: Callable[[str, str], Path]
) -> None:
    """Issue 26 item 3 in the UI: enter on an older run previews the pick-up; the preview
    says newer runs exist, naming the newest, before anything is confirmed."""
    flow_writer(
        "three",
        "from flowdrop_tui import flow\n\n@flow(resumable=True)\ndef main(run):\n"
        "    for n in run.rounds(range(3)):\n        run.state['n'] = n\n",
    )
    cli = CLI(layout.workspace)
    older = cli.json("run", "three")["run"]
    newest = cli.json("run", "three")["run"]
    app = RecordingApp(layout)
    async with app.run_test(size=SIZE) as pilot:
        main = app.main_screen
        await until(pilot, lambda: main.selected_run == newest, what="the runs listed")
        main.runs.focus()
        await pilot.press("down")
        await until(pilot, lambda: main.selected_run == older, what="the older run selected")
        await pilot.press("enter")
        modal = await until(
            pilot, lambda: isinstance(app.screen, PickUpModal) and app.screen, what="the preview"
        )
        forks = [w for w in modal.forecast.warnings if "newer runs exist" in w]
        assert len(forks) == 1 and newest in forks[0], modal.forecast.warnings
        assert "newer runs exist" in describe_plan(modal.forecast).plain
        await pilot.press("escape")
        await until(pilot, lambda: not isinstance(app.screen, PickUpModal), what="cancelled")
