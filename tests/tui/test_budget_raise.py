"""Issue 26 item 2: a budget is raised where its refusal is. Enter or ``r`` on a run
paused by its budget asks for the new limit (the reached one prefilled) and resumes
under it, as ``resume RUN --max-rounds N`` does; a pick-up out of budget is raised,
then previewed; ``b`` (and the palette) asks the same; ``y`` copies a run's id."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from textual.widgets import Input, Static

from flowdrop_tui.core.paths import Layout
from flowdrop_tui.core.records.run_record.run_fold import list_run_ids, load_run
from flowdrop_tui.core.records.run_record.run_info import Status
from flowdrop_tui.tui.app import FlowdropApp
from flowdrop_tui.tui.screens.pick_up_modal import PickUpModal
from flowdrop_tui.tui.screens.raise_budget_modal import RaiseBudgetModal
from tests.conftest import CLI, events
from tests.tui.tui_helpers import RecordingApp, asked, settled, until

SIZE = (80, 24)

CAPPED = """
    from flowdrop_tui import flow

    @flow(resumable=True, budget={"rounds": 2})
    def main(run):
        for round in run.rounds():
            run.state["n"] = round
"""


def out_of_budget(layout: Layout, cli: CLI, flow_writer: Callable[[str, str], Path]) -> str:
    """A run of ``capped`` paused by its rounds budget (2 of 2 used)."""
    flow_writer("capped", CAPPED)
    cli("run", "capped", check=0)
    run_id = list_run_ids(layout)[0]
    info = load_run(layout, run_id)
    assert info.status == Status.PAUSED and info.budget_reached is not None
    return run_id


async def the_raise(pilot: Any, app: FlowdropApp) -> RaiseBudgetModal:
    modal: RaiseBudgetModal = await until(
        pilot, lambda: asked(app, RaiseBudgetModal), what="the raise dialog"
    )
    return modal


async def test_r_on_a_run_out_of_budget_raises_it_and_resumes_under_the_new_limit(
    layout: Layout, flow_writer: Callable[[str, str], Path], cli: CLI
) -> None:
    """``r`` → the dialog with 2 prefilled; a limit not above what is used, or not a
    number, is refused in the dialog; 4 resumes the same run for rounds 3 and 4, as
    ``--max-rounds 4`` would, and it pauses on the new limit."""
    run_id = out_of_budget(layout, cli, flow_writer)
    app = RecordingApp(layout)
    async with app.run_test(size=SIZE) as pilot:
        main = app.main_screen
        await until(pilot, lambda: main.selected_run == run_id, what="the run listed")
        await until(pilot, lambda: settled(app), what="the first reads")
        await pilot.press("r")
        modal = await the_raise(pilot, app)
        assert modal.title_text == f"Raise the rounds budget of run {run_id}"
        field = modal.query_one("#new-limit", Input)
        assert field.value == "2"  # the limit reached, prefilled
        question = str(modal.query_one("#raise-question", Static).render())
        assert "2 used of 2; out of budget" in question
        assert f"flowdrop-tui resume {run_id} --max-rounds N" in question
        problem = modal.query_one("#raise-problem", Static)
        await pilot.press("enter")  # 2 again: still out of budget
        await until(pilot, lambda: "not more than the 2 used" in str(problem.render()))
        await pilot.press("backspace", "x", "enter")
        await until(pilot, lambda: "a whole number (or none), not 'x'" in str(problem.render()))
        assert app.screen is modal and load_run(layout, run_id).status == Status.PAUSED
        await pilot.press("backspace", "4", "enter")
        await until(pilot, lambda: app.heard(f"run {run_id} of capped: resumed at round 3"))
        await until(pilot, lambda: load_run(layout, run_id).round == 4, what="rounds 3 and 4")
        await until(pilot, lambda: load_run(layout, run_id).status == Status.PAUSED)
    resumed = [ev for ev in events(layout.workspace, run_id) if ev["event"] == "resumed"]
    assert [ev["budget"]["overrides"] for ev in resumed] == [{"rounds": 4}]
    assert load_run(layout, run_id).budget_reached == {"budget": "rounds", "limit": 4, "used": 4}
    assert list_run_ids(layout) == [run_id]  # the same run went on


async def test_enter_on_a_closed_chain_out_of_budget_raises_it_then_previews_the_pick_up(
    layout: Layout, flow_writer: Callable[[str, str], Path], cli: CLI
) -> None:
    """A run closed out of budget: enter would pick up a chain with nothing left. The
    raise is asked for ``capped``'s chain, then the pick-up preview shows the new limit,
    and the new run is started with ``--max-rounds 3``. Escape in the dialog starts
    nothing."""
    run_id = out_of_budget(layout, cli, flow_writer)
    cli("stop", run_id, check=0)  # closed for good: cancelled, the chain out of budget
    app = RecordingApp(layout)
    async with app.run_test(size=SIZE) as pilot:
        main = app.main_screen
        await until(pilot, lambda: main.selected_run == run_id, what="the run listed")
        await until(pilot, lambda: settled(app), what="the first reads")
        main.flows.focus()
        await pilot.press("enter")
        modal = await the_raise(pilot, app)
        assert modal.title_text == "Raise the rounds budget of capped's chain"
        await pilot.press("escape")
        await until(pilot, lambda: not isinstance(app.screen, RaiseBudgetModal))
        await until(pilot, lambda: settled(app), what="nothing in flight")
        assert list_run_ids(layout) == [run_id]
        await pilot.press("enter")
        modal = await the_raise(pilot, app)
        await pilot.press("backspace", "3", "enter")
        preview = await until(pilot, lambda: asked(app, PickUpModal), what="preview")
        assert "budget       rounds 2/3" in str(preview.question)
        await until(pilot, lambda: preview.shown_at is not None, what="the preview painted")
        await pilot.press("y")
        await until(pilot, lambda: len(list_run_ids(layout)) == 2, what="the pick-up")
    new = list_run_ids(layout)[1]
    created = events(layout.workspace, new)[0]
    assert created["source"] == run_id and created["budget"]["overrides"] == {"rounds": 3}


async def test_b_from_the_palette_asks_the_raise_and_y_copies_the_run_id(
    layout: Layout, flow_writer: Callable[[str, str], Path], cli: CLI
) -> None:
    """``b`` is a command in the palette; run from there it asks the same dialog. ``y``
    puts the selected run's id on the clipboard (OSC 52) and says what it copied."""
    run_id = out_of_budget(layout, cli, flow_writer)
    app = RecordingApp(layout)
    async with app.run_test(size=SIZE) as pilot:
        main = app.main_screen
        await until(pilot, lambda: main.selected_run == run_id, what="the run listed")
        await until(pilot, lambda: settled(app), what="the first reads")
        commands = [command.title for command in app.get_system_commands(main)]
        assert "Raise budget (b)" in commands and "Copy run id (y)" in commands
        await pilot.press("y")
        assert app.clipboard == run_id
        assert app.heard(f"copied run id {run_id} (run capped)")
        await main.run_action("raise_budget")  # what the palette's command does
        modal = await the_raise(pilot, app)
        assert modal.query_one("#new-limit", Input).value == "2"
        await pilot.press("escape")
        await until(pilot, lambda: not isinstance(app.screen, RaiseBudgetModal))
        assert load_run(layout, run_id).status == Status.PAUSED
