"""Keys go where the user sees focus when they are handled, not when they were typed.

Textual forwards each key to the widget focused when the app takes it off its
queue, and moves focus later (``Widget.focus`` is deferred; a binding's action
runs only once the key has bubbled back up to the app). Keys typed in a burst
(``/shell⏎⏎`` pasted by tmux, or typed fast while runs stream events) are
therefore all sent to the widget that had focus before the first of them was
handled: the filter's letters reached the flow table (where ``n``, ``p``,
``r``, ``q`` are actions) and the second enter ran the flow under the old
cursor. Here every key remembers where it was sent; when it is handled and focus
has moved meanwhile, it is sent on to where focus is now (docs/decisions.md,
"The terminal UI's keys").

A question is never answered by a key typed before it was on screen: a preview
read late (under load) was pushed while an enter typed earlier was still queued,
and that enter, sent on to the focused "Pick up" button, confirmed it before its
first frame. A screen that asks (``AsksFirst``) notes when its first frame was
painted; a key whose time (``Message.time``, taken when the key arrived) is
older is dropped — unless it leaves things as they are (escape, ``n``): a fast
``x n`` still keeps the paused run, never starting anything behind the dialog
(docs/decisions.md, "The UI: hurried keys").
"""

from __future__ import annotations

import time
from typing import Any, ClassVar

from textual import events
from textual.app import App
from textual.dom import DOMNode
from textual.geometry import Region
from textual.screen import ModalScreen
from textual.strip import Strip
from textual.widget import Widget

from flowdrop_tui.tui.textual_compat import forward_event

SHORT_ROWS = 30  # a screen shorter than this has a question at its top, compact


class AsksFirst(ModalScreen[Any]):
    """A modal screen that asks before an action (a question subclasses it and calls
    ``shown_after_paint`` from its ``on_mount``; a ``ModalScreen`` itself, so the
    stylesheet's ``ModalScreen`` rules reach it): keys older than its first
    frame are not its answers. ``shown_at``: when that frame was rendered for the
    terminal (its first ``render_lines``; headless, where nothing is rendered, after
    its first refresh), on the clock of ``Message.time`` (monotonic; Textual's
    ``get_time`` off Windows); None until then."""

    shown_at: float | None = None
    title_text: str = ""  # what it asks, in a few words (a warning names the open one)
    # Keys that answer "no": typed early, they still answer (nothing runs unasked).
    EARLY_ANSWERS: ClassVar[frozenset[str]] = frozenset({"escape"})
    # Under 30 rows the stylesheet puts it at the top, compact: toasts land at the bottom.
    VERTICAL_BREAKPOINTS = [(0, "-short"), (SHORT_ROWS, "-tall")]  # noqa: RUF012 (Textual's)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        try:  # its first frame already the right size (breakpoints apply after it)
            self.fit_height(self.app.size.height)
        except RuntimeError:  # no active app (made outside one): fitted as it mounts
            pass

    def fit_height(self, rows: int) -> None:
        self.set_class(rows < SHORT_ROWS, "-short")
        self.set_class(rows >= SHORT_ROWS, "-tall")

    def render_lines(self, crop: Region) -> list[Strip]:
        # The frame is being rendered to be written: a key after this was typed with
        # the question in view. (The refresh callback comes later: a burst typed the
        # moment it showed was queued ahead of it.)
        self.painted()
        return super().render_lines(crop)

    def painted(self) -> None:
        if self.shown_at is None:
            self.shown_at = time.monotonic()


def shown_after_paint(screen: AsksFirst) -> None:
    """Note when ``screen``'s first frame has been painted, at the latest after its
    first refresh. Its size class is set now: breakpoints apply after that frame."""
    screen.fit_height(screen.app.size.height)
    screen.call_after_refresh(screen.painted)


def too_early(app: App[Any], event: events.Key) -> bool:
    """Whether ``event`` reaches a question that was not on screen when it was typed."""
    screen = app.screen
    if not isinstance(screen, AsksFirst) or event.key in screen.EARLY_ANSWERS:
        return False
    return screen.shown_at is None or event.time < screen.shown_at


class AimedKey(events.Key):
    """A key and the node it was sent to; its time is the key's as it arrived."""

    __slots__ = ["aimed_at"]

    def __init__(
        self, key: str, character: str | None, aimed_at: DOMNode, typed: float | None = None
    ) -> None:
        super().__init__(key, character)
        self.aimed_at = aimed_at
        if typed is not None:
            self.time = typed


AimedKey.handler_name = "on_key"  # handled as the key it is, by every key handler


def aim(app: App[Any], event: events.Key) -> events.Key:
    """The key from the terminal, marked with where the app is about to send it."""
    return AimedKey(event.key, event.character, app.focused or app.screen, event.time)


def send_on(app: App[Any], event: events.Key, here: DOMNode | None = None) -> bool:
    """Send ``event``, sent to ``here`` (or as it says), on to where focus is now if
    that moved. True when it was sent on, or dropped because it would reach a question
    that was not yet on screen when it was typed (the caller must then not act on it)."""
    now: Widget = app.focused or app.screen
    aimed = event.aimed_at if isinstance(event, AimedKey) else here
    if aimed is None or aimed is now:
        return False
    event.prevent_default()
    event.stop()
    if not too_early(app, event):
        forward_event(now, AimedKey(event.key, event.character, now, event.time))
    return True
