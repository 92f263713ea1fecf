"""The selected run's events as they are appended, with a follow mode.

Following is a mode, set by where the user leaves the view: scrolled to the
bottom, new events scroll into view; scrolled up, the view stays put (and says
so) until it is back at the bottom. A resize keeps the mode (a smaller window
must not silently stop following).
"""

from __future__ import annotations

from typing import Any, ClassVar

from textual.binding import Binding, BindingType
from textual.widgets import Log

from flowdrop_tui.tui.labels import event_line

KEEP = 2000  # lines on screen; older ones scroll out (the record keeps them all)


class EventFeed(Log):
    """A ``Log`` of one run's events, one line each."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("j", "scroll_down", "Down", show=False),
        Binding("k", "scroll_up", "Up", show=False),
        Binding("g,home", "scroll_home", "First", show=False),
        Binding("G,end", "follow", "Follow", show=False),
    ]

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(max_lines=KEEP, auto_scroll=False, **kwargs)
        self.run_id: str | None = None
        self.shown = 0  # events shown since the run was selected
        self.follow = True

    def show_history(self, run_id: str | None, events: list[dict[str, Any]], dropped: int) -> None:
        """Start over with ``run_id``'s recent events (``dropped`` older ones not shown)."""
        self.run_id = run_id
        self.clear()
        self.shown = 0
        if dropped:
            self.write_line(f"… {dropped} earlier events (see the run's cycle.jsonl)")
        self.follow = True
        self.append(events)
        self._show_follow()

    def append(self, events: list[dict[str, Any]]) -> None:
        """Add new events; scroll them into view when following."""
        if events:
            self.write_lines([event_line(ev) for ev in events])
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
