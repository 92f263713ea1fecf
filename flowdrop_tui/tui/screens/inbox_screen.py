"""``i``: the inbox (SPEC §21) — what waits on a person, each item acted on with enter
(answer a question, raise a budget and resume — the dialog ``b`` shows, the reached
limit prefilled —, resume, pick up) or dismissed with ``x``.

Reads and actions are thread workers calling the core through the mode the app chose
(``core/mode.py``); the list is read again every few seconds while it is open.
"""

from __future__ import annotations

from typing import Any, ClassVar

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Static

from flowdrop_tui.core import inbox
from flowdrop_tui.core.errors import FlowdropError
from flowdrop_tui.core.flows.discovery import resolve_flow
from flowdrop_tui.core.mode import Mode
from flowdrop_tui.core.records.run_record import run_fold
from flowdrop_tui.core.records.spend.budget import Limits, Reached
from flowdrop_tui.core.run.forecast import StartOptions
from flowdrop_tui.tui.screens.answer_modal import AnswerModal
from flowdrop_tui.tui.screens.confirm_modal import ask
from flowdrop_tui.tui.user_writes import user_write

UI = {"via": "ui"}
REREAD = 3.0  # seconds between reads while the inbox is open


class InboxScreen(Screen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding(
            "enter",
            "act",
            "Act",
            id="inbox-act",
            tooltip="Do the selected item's action: answer, raise the budget and resume, "
            "resume, pick up",
        ),
        Binding(
            "x,delete",
            "dismiss_item",
            "Dismiss",
            id="inbox-dismiss",
            tooltip="Keep the selected item out of the inbox",
        ),
        Binding(
            "escape,i", "app.pop_screen", "Close", id="inbox-close", tooltip="Back to the flows"
        ),
    ]

    def __init__(self, mode: Mode) -> None:
        super().__init__(id="inbox")
        self.mode = mode
        self.items: list[dict[str, Any]] = []

    def compose(self) -> ComposeResult:
        yield Static("Inbox: what waits on you", id="inbox-title")
        table: DataTable[str] = DataTable(id="inbox-items", cursor_type="row")
        table.add_columns("flow", "what", "action", "run")
        yield table
        yield Static("", id="inbox-command", markup=False)
        yield Footer()

    def on_mount(self) -> None:
        self.read()
        self.set_interval(REREAD, self.read)

    @work(thread=True, exclusive=True, group="inbox-read", exit_on_error=False)
    def read(self) -> None:
        self.mode.sync()
        found = self.mode.inbox()  # remote: workers send the notices
        self.app.call_from_thread(self.show, found)

    def show(self, found: list[dict[str, Any]]) -> None:
        table = self.query_one(DataTable)
        chosen = self.selected
        self.items = found
        table.clear()
        for item in found:
            table.add_row(
                str(item["flow"]),
                str(item["message"]),
                str(item["action"]),
                item["run"],
                key=item["id"],
            )
        if chosen is not None:
            ids = [item["id"] for item in found]
            if chosen["id"] in ids:
                table.move_cursor(row=ids.index(chosen["id"]))
        self.on_data_table_row_highlighted()
        if not found:
            self.query_one("#inbox-command", Static).update("nothing waits on you")

    def on_data_table_row_selected(self, _: DataTable.RowSelected) -> None:
        self.action_act()  # enter on the table: the table takes the key first

    def on_data_table_row_highlighted(self, _: object = None) -> None:
        item = self.selected
        if item is not None:
            self.query_one("#inbox-command", Static).update(f"{item['action']}: {item['command']}")

    @property
    def selected(self) -> dict[str, Any] | None:
        table = self.query_one(DataTable)
        row = table.cursor_row
        if not self.items or row is None or not 0 <= row < len(self.items):
            return None
        return self.items[row]

    # -- actions ---------------------------------------------------------------------------

    def action_act(self) -> None:
        item = self.selected
        if item is None:
            return
        kind = item["kind"]
        if kind == "gate":
            modal = AnswerModal(
                f"Run {item['run']} of {item['flow']} asks",
                str(item["message"]),
                item.get("choices"),
            )

            def answered(reply: str | None) -> None:
                if reply is not None:
                    self.answer(item, reply)

            self.app.push_screen(modal, answered)
        elif kind == "budget_reached":
            self.offer_raise(item)
        elif kind in ("failed", "interrupted"):
            self.pick_up(item)
        elif kind in ("limit_wait", "undelivered"):
            self.dismiss_ids([item["id"]])
        else:
            self.resume(item, [])

    @work(thread=True, group="inbox-raise", exit_on_error=False)
    def offer_raise(self, item: dict[str, Any]) -> None:
        """The budget the run paused on, read from its record: the dialog ``b`` shows,
        the reached limit prefilled (``raise_budget_modal.py``)."""
        try:
            reached = run_fold.load_run(self.mode.layout, item["run"]).budget_reached
        except FlowdropError as exc:
            self.app.call_from_thread(
                self.app.notify, exc.message, title="Refused", severity="error", markup=False
            )
            return
        if reached is not None:
            self.app.call_from_thread(self._ask_raise, item, reached)

    def _ask_raise(self, item: dict[str, Any], reached: dict[str, Any]) -> None:
        from flowdrop_tui.tui.screens.raise_budget_modal import (  # loaded when first asked
            RaiseBudgetModal,
            lift_confirmed,
            limit_args,
        )

        budget = str(reached.get("budget"))
        limit, used = reached.get("limit"), reached.get("used")
        if not isinstance(limit, int | float) or not isinstance(used, int | float):
            return  # a record that does not say: its command is on the screen
        question = RaiseBudgetModal(
            f"run {item['run']}",
            Reached(budget, limit, used),
            f"flowdrop-tui resume {item['run']} --max-{budget} N",
            resuming=True,
        )

        def go(limits: Limits) -> None:
            self.resume(item, limit_args(limits))

        ask(self.app, question, lift_confirmed(self.app, go))

    def action_dismiss_item(self) -> None:
        item = self.selected
        if item is not None:
            self.dismiss_ids([item["id"]])

    @work(thread=True, group="inbox-act", exit_on_error=False)
    @user_write
    def answer(self, item: dict[str, Any], reply: str) -> None:
        self._done(
            lambda: self.mode.answer(item["run"], reply, gate=item.get("gate"), by=UI),
            f"answered {reply!r}; run {item['run']} resumes",
        )

    @work(thread=True, group="inbox-act", exit_on_error=False)
    @user_write
    def resume(self, item: dict[str, Any], extra: list[str]) -> None:
        self._done(
            lambda: self.mode.resume(item["run"], extra, by=UI), f"run {item['run']} resumes"
        )

    @work(thread=True, group="inbox-act", exit_on_error=False)
    @user_write
    def pick_up(self, item: dict[str, Any]) -> None:
        def start() -> Any:
            ref = resolve_flow(self.mode.layout, str(item["flow"]), cwd=self.mode.layout.workspace)
            return self.mode.start(ref, StartOptions(), [])

        self._done(start, f"{item['flow']} picked up")

    @work(thread=True, group="inbox-act", exit_on_error=False)
    @user_write
    def dismiss_ids(self, ids: list[str]) -> None:
        self._done(lambda: inbox.dismiss(self.mode.layout, ids), "dismissed")

    def _done(self, act: Any, said: str) -> None:
        try:
            act()
        except FlowdropError as exc:
            self.app.call_from_thread(
                self.app.notify, exc.message, title="Refused", severity="error", markup=False
            )
        else:
            self.app.call_from_thread(self.app.notify, said, markup=False)
        self.read()
