"""A question that takes an answer, not a yes or no: a run's ``ask`` (a button per
choice, or a line to type) and the new limit before a budget resume (SPEC §21)."""

from __future__ import annotations

from typing import ClassVar

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Static

from flowdrop_tui.tui.keys import AsksFirst, shown_after_paint
from flowdrop_tui.tui.widgets.typed_input import TypedInput


class AnswerModal(AsksFirst, ModalScreen[str | None]):
    """Asks ``title`` above ``question``: answers the choice pressed, the text typed
    (enter), or None (escape). Keys typed before it was painted are not its answer."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "cancel", "Cancel", id="cancel-reply"),
    ]

    def __init__(self, title: str, question: str, choices: list[str] | None = None) -> None:
        super().__init__(id="reply")
        self.title_text = title
        self.question = question
        self.choices = choices

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Static(f"{self.title_text}\n\n{self.question}", markup=False, id="reply-question")
            if self.choices:
                with Horizontal(classes="buttons"):
                    for number, choice in enumerate(self.choices):
                        yield Button(choice, id=f"choice-{number}", variant="primary")
            else:
                yield TypedInput(placeholder="type the answer, then enter", id="reply-text")

    def on_mount(self) -> None:
        if self.choices:
            self.query_one("#choice-0", Button).focus()
        else:
            self.query_one(Input).focus()
        shown_after_paint(self)

    @on(Button.Pressed)
    def chosen(self, event: Button.Pressed) -> None:
        assert self.choices is not None and event.button.id is not None
        self.dismiss(self.choices[int(event.button.id.removeprefix("choice-"))])

    @on(Input.Submitted)
    def typed(self, event: Input.Submitted) -> None:
        if event.value.strip():
            self.dismiss(event.value.strip())

    def action_cancel(self) -> None:
        self.dismiss(None)
