"""``x`` on a paused run: closing it for good is asked, never done by a stray key."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Static

from flowdrop_tui.core.records.events import RunInfo


def describe_close(info: RunInfo) -> Text:
    """Which run, where it paused, and what closing it loses (and keeps)."""
    text = Text()
    text.append(f"Close paused run {info.run} for good?\n\n", style="bold")
    text.append(f"  flow         {info.key}\n")
    text.append(f"  paused after round {info.round}\n\n")
    text.append(  # one paragraph: it wraps to the dialog's width (74 cells at 80×24)
        "Closing ends it cancelled. It can never be resumed: where it paused inside "
        "its loop is lost. Its state is kept: enter on it picks that state up into a "
        "new run, whose loops start from the beginning."
    )
    return text


class CloseRunModal(ModalScreen[bool]):
    """Answers True to close the paused run cancelled, False to leave it paused."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("y", "answer(True)", "Close it", id="confirm-close"),
        Binding("escape,n", "answer(False)", "Keep it paused", id="cancel-close"),
    ]

    def __init__(self, info: RunInfo) -> None:
        super().__init__(id="close-run")
        self.info = info

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Static(describe_close(self.info), markup=False, id="close-run-what")
            with Horizontal(classes="buttons"):
                yield Button("Close for good (y)", variant="error", id="confirm")
                yield Button("Keep it paused (n)", id="cancel")

    def on_mount(self) -> None:
        self.query_one("#cancel", Button).focus()  # the safe answer first

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "confirm")

    def action_answer(self, answer: bool) -> None:
        self.dismiss(answer)
