"""``/``: filter the focused table (flows or runs) by the text its rows show."""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

from textual import events, on
from textual.binding import Binding, BindingType
from textual.widgets import Input

from flowdrop_tui.tui.keys import send_on


class FilterBar(Input):
    """Typing filters at once; enter keeps the filter, escape clears it.

    Closing calls ``on_close`` at once rather than posting a message: the key after
    enter must find the filter applied and the table focused (docs/decisions.md,
    "The terminal UI's keys")."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "clear_filter", "Clear filter", id="clear-filter"),
    ]

    def __init__(self, on_close: Callable[[bool], None]) -> None:
        super().__init__(id="filter")
        self.on_close = on_close
        self.target = "flows"

    @on(events.Key)
    async def _send_on(self, event: events.Key) -> None:
        # Called before Input's own: a letter that reaches the bar after focus moved
        # away goes on to the focused widget instead of into a hidden filter.
        send_on(self.app, event, self)

    def open_for(self, target: str, what: str, value: str) -> None:
        """Show the bar for the table ``target`` (``what`` names it in the prompt)."""
        self.target = target
        self.border_title = f"filter {what}"
        self.border_subtitle = "enter keeps it · escape clears it"
        self.placeholder = "any text its rows show: name, status, id, round…"
        self.value = value
        self.cursor_position = len(value)
        self.display = True

    def action_clear_filter(self) -> None:
        self.value = ""
        self.on_close(True)

    async def action_submit(self) -> None:
        self.on_close(False)


def filtered_title(text: str) -> str:
    """What a pane's title adds while a filter is kept."""
    return f" · filter: {text}" if text else ""
