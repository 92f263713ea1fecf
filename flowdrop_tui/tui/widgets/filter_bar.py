"""``/``: filter the flows and runs by what their names and ids contain."""

from __future__ import annotations

from typing import ClassVar

from textual.binding import Binding, BindingType
from textual.message import Message
from textual.widgets import Input


class FilterBar(Input):
    """Typing filters at once; enter keeps the filter, escape clears it."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "clear_filter", "Clear filter", id="clear-filter"),
    ]

    class Closed(Message):
        """The filter bar was closed (``cleared``: and its filter dropped)."""

        def __init__(self, cleared: bool) -> None:
            super().__init__()
            self.cleared = cleared

    def __init__(self) -> None:
        super().__init__(
            placeholder="filter flows and runs (enter keeps it, escape clears it)", id="filter"
        )

    def action_clear_filter(self) -> None:
        self.value = ""
        self.post_message(self.Closed(cleared=True))

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.post_message(self.Closed(cleared=False))
