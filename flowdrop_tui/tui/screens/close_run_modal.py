"""``x`` on a paused run: closing it for good is asked, never done by a stray key."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.binding import BindingType

from flowdrop_tui.core.records.run_record.run_info import RunInfo
from flowdrop_tui.tui.screens.confirm_modal import ConfirmModal, answer_bindings


def describe_close(info: RunInfo) -> Text:
    """Where the run paused, and what closing it loses (and keeps), below the title."""
    text = Text()
    text.append(f"  flow         {info.key}\n")
    text.append(f"  paused after round {info.round}\n\n")
    text.append(  # one paragraph: it wraps to the dialog's width (74 cells at 80×24)
        "Closing ends it cancelled. It can never be resumed: where it paused inside "
        "its loop is lost. Its state is kept: enter on it picks that state up into a "
        "new run, whose loops start from the beginning."
    )
    return text


class CloseRunModal(ConfirmModal):
    """Answers True to close the paused run cancelled, False to leave it paused."""

    BINDINGS: ClassVar[list[BindingType]] = answer_bindings("close", "Close it", "Keep it paused")

    def __init__(self, info: RunInfo) -> None:
        super().__init__(
            f"Close paused run {info.run} for good?",
            describe_close(info),
            confirm="Close for good (y)",
            variant="error",
            cancel="Keep it paused (n)",
            focus="cancel",  # the safe answer first
            id="close-run",
            body_id="close-run-what",
        )
        self.info = info
