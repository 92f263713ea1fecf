"""SPEC §21: ``i`` opens the inbox; enter on a question answers it from a modal with its
choices, enter on a budget asks the new limit (the dialog ``b`` shows, prefilled), ``x``
dismisses — real detached runs."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from textual.widgets import Button, DataTable, Input

from flowdrop_tui.core.paths import Layout
from flowdrop_tui.core.records.run_record.run_fold import load_run
from flowdrop_tui.core.records.run_record.run_info import Status
from flowdrop_tui.tui.screens.answer_modal import AnswerModal
from flowdrop_tui.tui.screens.inbox_screen import InboxScreen
from flowdrop_tui.tui.screens.raise_budget_modal import RaiseBudgetModal
from tests.conftest import CLI, events, wait_for
from tests.gates.test_ask_answer import ASKS
from tests.gates.test_inbox import CAPPED, FAILS
from tests.tui.tui_helpers import RecordingApp, asked, until

SIZE = (120, 36)


async def test_answer_a_question_from_the_inbox(
    layout: Layout, flow_writer: Callable[[str, str], Path]
) -> None:
    cli = CLI(layout.workspace)
    flow_writer("asks", ASKS)
    run_id = str(cli.json("run", "asks", "--detach")["run"])
    wait_for(lambda: cli.json("show", run_id)["gate"] is not None)
    app = RecordingApp(layout)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.main_screen.ready, what="the main screen")
        await pilot.press("i")
        await until(pilot, lambda: isinstance(app.screen, InboxScreen), what="the inbox")
        inbox = app.screen
        assert isinstance(inbox, InboxScreen)
        await until(pilot, lambda: inbox.items, what="the question listed")
        assert inbox.items[0]["kind"] == "gate"
        await pilot.press("enter")
        await until(pilot, lambda: asked(app, AnswerModal), what="the question")
        labels = [str(b.label) for b in app.screen.query(Button)]
        assert labels == ["yes", "no"]
        await pilot.press("enter")  # the first choice has focus: "yes"
        await until(pilot, lambda: app.heard("answered 'yes'"), what="the answer taken")
        wait_for(lambda: (cli.json("show", run_id)["gate"] or {}).get("question") == "ship 1?")
        await until(
            pilot,
            lambda: inbox.items and "ship 1?" in str(inbox.items[0]["message"]),
            what="the next question",
        )
        await pilot.press("enter")
        await until(pilot, lambda: asked(app, AnswerModal), what="the question")
        await pilot.press("tab", "enter")  # "no"
        await until(pilot, lambda: app.heard("answered 'no'"), what="the second answer")
    wait_for(lambda: load_run(layout, run_id).status == Status.COMPLETED)
    answered = [e for e in events(layout.workspace, run_id) if e["event"] == "gate_answered"]
    assert [e["answer"] for e in answered] == ["yes", "no"]
    assert answered[0]["by"]["via"] == "ui"


async def test_raise_a_budget_and_dismiss_from_the_inbox(
    layout: Layout, flow_writer: Callable[[str, str], Path]
) -> None:
    cli = CLI(layout.workspace)
    flow_writer("capped", CAPPED)
    cli("run", "capped", check=0)
    capped = str(cli.json("runs", "capped")[0]["run"])
    flow_writer("red", FAILS)
    cli("run", "red", check=1)
    app = RecordingApp(layout)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.main_screen.ready, what="the main screen")
        await pilot.press("i")
        await until(pilot, lambda: isinstance(app.screen, InboxScreen), what="the inbox")
        inbox = app.screen
        assert isinstance(inbox, InboxScreen)
        await until(pilot, lambda: len(inbox.items) == 2, what="both items")
        kinds = [item["kind"] for item in inbox.items]
        table = inbox.query_one(DataTable)
        table.move_cursor(row=kinds.index("failed"))
        await pilot.press("x")
        await until(pilot, lambda: len(inbox.items) == 1, what="the failure dismissed")
        await pilot.press("enter")
        modal = await until(pilot, lambda: asked(app, RaiseBudgetModal), what="the new limit")
        assert modal.query_one(Input).value == "2"  # prefilled as b's is: the limit reached
        assert modal.title_text == f"Raise the rounds budget of run {capped}"
        await pilot.press("5", "enter")
        await until(pilot, lambda: app.heard(f"run {capped} resumes"), what="the resume")
        await pilot.press("escape")
        await until(pilot, lambda: not isinstance(app.screen, InboxScreen), what="closed")
    wait_for(lambda: load_run(layout, capped).rounds == 5)
    wait_for(lambda: load_run(layout, capped).status == Status.PAUSED)
    assert load_run(layout, capped).budget_limits["rounds"] == 5


class RingingApp(RecordingApp):
    def __init__(self, layout: Layout) -> None:
        super().__init__(layout)
        self.rang = 0

    def bell(self) -> None:
        self.rang += 1
        super().bell()


async def test_terminal_notices_ring_for_what_newly_waits_while_the_ui_is_open(
    layout: Layout, flow_writer: Callable[[str, str], Path]
) -> None:
    cli = CLI(layout.workspace)
    flow_writer("red", FAILS)
    cli("run", "red", check=1)  # waited before the UI opened: no ring for it
    (layout.root / "config.toml").write_text("[notify]\nterminal = true\n")
    app = RingingApp(layout)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app._inbox_rang, what="the first look at the inbox")
        assert app.rang == 0
        flow_writer("capped", CAPPED)
        cli("run", "capped", check=0)
        await until(pilot, lambda: app.rang == 1, what="the bell")
