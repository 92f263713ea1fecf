"""Issue 35 item 4: ``none`` typed in a budget dialog — ``b``'s, or the inbox's — says
once what no limit means and lifts it only on that question's ``y``; ``n`` (or a
second enter, which lands on the focused "Keep a limit") keeps the budget."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from textual.widgets import Static

from flowdrop_tui.core.paths import Layout
from flowdrop_tui.core.records.run_record.run_fold import load_run
from flowdrop_tui.core.records.run_record.run_info import Status
from flowdrop_tui.tui.screens.inbox_screen import InboxScreen
from flowdrop_tui.tui.screens.raise_budget_modal import LiftBudgetModal, RaiseBudgetModal
from tests.conftest import CLI, events
from tests.tui.test_budget_raise import out_of_budget
from tests.tui.tui_helpers import RecordingApp, asked, settled, until

SIZE = (80, 24)
WORDS = "no limit on rounds: the loop runs until it stops itself or you stop it"


async def type_none(pilot: object, app: RecordingApp) -> LiftBudgetModal:
    await until(pilot, lambda: asked(app, RaiseBudgetModal), what="the raise dialog")  # type: ignore[arg-type]
    await pilot.press("backspace", "n", "o", "n", "e", "enter")  # type: ignore[attr-defined]
    lift: LiftBudgetModal = await until(
        pilot,  # type: ignore[arg-type]
        lambda: asked(app, LiftBudgetModal),
        what="the question before lifting",
    )
    assert WORDS in str(lift.query_one("#lift-words", Static).render())
    return lift


async def test_none_in_bs_dialog_asks_before_lifting_and_n_keeps_the_budget(
    layout: Layout, flow_writer: Callable[[str, str], Path], cli: CLI
) -> None:
    """``b``, ``none``, enter resumed the run with no limit at once; now a question
    says what that means: enter on it (the cancel has focus) or ``n`` keeps the
    budget, ``y`` lifts it and the run resumes under ``--max-rounds none``."""
    run_id = out_of_budget(layout, cli, flow_writer)
    app = RecordingApp(layout)
    async with app.run_test(size=SIZE) as pilot:
        main = app.main_screen
        await until(pilot, lambda: main.selected_run == run_id, what="the run listed")
        await until(pilot, lambda: settled(app), what="the first reads")
        await pilot.press("b")
        await type_none(pilot, app)
        await pilot.press("enter")  # a hurried second enter: the focused "Keep a limit"
        await until(pilot, lambda: not isinstance(app.screen, LiftBudgetModal), what="closed")
        await until(pilot, lambda: settled(app), what="nothing in flight")
        assert load_run(layout, run_id).status == Status.PAUSED
        await pilot.press("b")
        await type_none(pilot, app)
        await pilot.press("y")
        await until(pilot, lambda: app.heard(f"run {run_id} of capped: resumed at round 3"))
    resumed = [ev for ev in events(layout.workspace, run_id) if ev["event"] == "resumed"]
    assert [ev["budget"]["overrides"] for ev in resumed] == [{"rounds": None}]


async def test_none_in_the_inboxs_dialog_asks_before_lifting(
    layout: Layout, flow_writer: Callable[[str, str], Path], cli: CLI
) -> None:
    """The inbox's budget item: the same dialog, the same question; ``n`` keeps the run
    paused, ``y`` resumes it with no limit."""
    run_id = out_of_budget(layout, cli, flow_writer)
    app = RecordingApp(layout)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.main_screen.ready, what="the main screen")
        await pilot.press("i")
        inbox = await until(pilot, lambda: isinstance(app.screen, InboxScreen) and app.screen)
        await until(pilot, lambda: inbox.items, what="the budget listed")
        await pilot.press("enter")
        await type_none(pilot, app)
        await pilot.press("n")
        await until(pilot, lambda: app.screen is inbox, what="back in the inbox")
        assert load_run(layout, run_id).status == Status.PAUSED
        await pilot.press("enter")
        await type_none(pilot, app)
        await pilot.press("y")
        await until(pilot, lambda: app.heard(f"run {run_id} resumes"), what="the resume")
    resumed = [ev for ev in events(layout.workspace, run_id) if ev["event"] == "resumed"]
    assert [ev["budget"]["overrides"] for ev in resumed] == [{"rounds": None}]
