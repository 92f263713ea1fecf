"""The selected run's events as they are appended, with a follow mode.

Following is a mode, set by where the user leaves the view: scrolled to the
bottom, new events scroll into view; scrolled up, the view stays put (and says
so) until it is back at the bottom. A resize keeps the mode (a smaller window
must not silently stop following).

An event is never cut at the pane's edge: its line wraps, the rest indented under its
words, and is wrapped again when the pane changes width. A narrow pane (80×24 gives it
about 36 columns) takes a compact line — the time to the second, the event's name
unpadded — so the words start early and a round's number is on screen.
"""

from __future__ import annotations

import re
import textwrap
from collections import deque
from typing import Any, ClassVar

from textual.binding import Binding, BindingType
from textual.widgets import Log

from flowdrop_tui.tui.labels import clock, event_detail, event_line

KEEP = 2000  # events on screen; older ones scroll out (the record keeps them all)
COMPACT = 60  # columns: a pane narrower than this takes the compact line
DETAIL_AT = 30  # where the words of a full line start (``labels.event_line``)
_ROUND = re.compile(r"\bround (\d)")  # "round 12" stays on one line
KEEP_TOGETHER = "\u00a0"  # not a space to textwrap; a space again once wrapped


def feed_lines(ev: dict[str, Any], width: int) -> list[str]:
    """One event as the lines it takes in a pane ``width`` columns wide (0: unknown,
    one line). Narrow: ``01:44:55 round_ended capped round 2 · ok`` wrapped, the rest
    indented two; else the full line, the rest indented under its words."""
    if width <= 0:
        return [event_line(ev)]
    if width < COMPACT:
        text, indent = f"{clock(ev.get('t'))[:8]} {ev.get('event')} {event_detail(ev)}", 2
    else:
        text, indent = event_line(ev), DETAIL_AT
    lines = textwrap.wrap(
        _ROUND.sub(f"round{KEEP_TOGETHER}\\1", text),
        width,
        subsequent_indent=" " * indent,
        break_on_hyphens=False,
        drop_whitespace=True,
    )
    return [line.replace(KEEP_TOGETHER, " ") for line in lines] or [text]


class EventFeed(Log):
    """A ``Log`` of one run's events, one line each."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("j", "scroll_down", "Down", show=False),
        Binding("k", "scroll_up", "Up", show=False),
        Binding("g,home", "scroll_home", "First", show=False),
        Binding("G,end", "follow", "Follow", show=False),
    ]

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(max_lines=KEEP * 4, auto_scroll=False, **kwargs)
        self.run_id: str | None = None
        self.shown = 0  # events shown since the run was selected
        self.follow = True
        self.kept: deque[dict[str, Any]] = deque(maxlen=KEEP)  # to wrap again on a resize
        self.dropped = 0  # older events not shown
        self.wrapped_to = 0  # the width the lines on screen were wrapped to

    def _wrap_width(self) -> int:
        """Columns a line may take: the pane's, less its vertical scrollbar."""
        if not self.is_mounted:
            return 0
        return max(0, self.content_region.width - self.styles.scrollbar_size_vertical)

    def show_history(self, run_id: str | None, events: list[dict[str, Any]], dropped: int) -> None:
        """Start over with ``run_id``'s recent events (``dropped`` older ones not shown)."""
        self.run_id = run_id
        self.clear()
        self.shown = 0
        self.kept.clear()
        self.dropped = dropped
        self.wrapped_to = self._wrap_width()
        self._write_dropped()
        self.follow = True
        self.append(events)
        self._show_follow()

    def _write_dropped(self) -> None:
        if self.dropped:
            self.write_line(f"… {self.dropped} earlier events (see the run's cycle.jsonl)")

    def append(self, events: list[dict[str, Any]]) -> None:
        """Add new events; scroll them into view when following."""
        if events:
            width = self.wrapped_to
            self.write_lines([line for ev in events for line in feed_lines(ev, width)])
            self.kept.extend(events)
            self.shown += len(events)
            if self.follow:
                self.scroll_end(animate=False, immediate=True, x_axis=False)

    @property
    def following(self) -> bool:
        return self.follow

    def watch_scroll_y(self, old_value: float, new_value: float) -> None:
        super().watch_scroll_y(old_value, new_value)
        self.follow = self.is_vertical_scroll_end  # where the user leaves the view
        self._show_follow()

    def action_follow(self) -> None:
        """End: to the bottom and following, in one press. (An animated scroll ended
        short of a bottom that moved on meanwhile, and left the mode off.)"""
        self.follow = True
        self.scroll_end(animate=False, immediate=True, x_axis=False)
        self._show_follow()

    def on_resize(self) -> None:
        width = self._wrap_width()
        if width != self.wrapped_to:  # wrapped again to the new width, from the events kept
            self.wrapped_to = width
            self.clear()
            self._write_dropped()
            self.write_lines([line for ev in self.kept for line in feed_lines(ev, width)])
        self.call_after_refresh(self._keep_following)  # once the new size is laid out

    def _keep_following(self) -> None:
        if self.follow:  # as it is now: the user may have scrolled up meanwhile
            self.scroll_end(animate=False, immediate=True, x_axis=False)

    def _show_follow(self) -> None:
        if self.run_id is None:
            self.border_subtitle = ""
        elif self.following:
            self.border_subtitle = "following"
        else:
            self.border_subtitle = "scrolled up: not following (end to follow)"
