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
from textual.screen import Screen
from textual.widget import Widget

from flowdrop_tui.tui.textual_compat import forward_event


class AsksFirst:
    """A screen that asks before an action (a ``ModalScreen`` mixes this in and calls
    ``shown_after_paint`` from its ``on_mount``): keys older than its first frame are
    not its answers. ``shown_at``: that frame's time, on the clock of ``Message.time``
    (monotonic; Textual's ``get_time`` off Windows); None until it is painted."""

    shown_at: float | None = None
    title_text: str = ""  # what it asks, in a few words (a warning names the open one)
    # Keys that answer "no": typed early, they still answer (nothing runs unasked).
    EARLY_ANSWERS: ClassVar[frozenset[str]] = frozenset({"escape"})
    # Under 30 rows the stylesheet puts it at the top, compact: toasts land at the bottom.
    VERTICAL_BREAKPOINTS: ClassVar[list[tuple[int, str]] | None] = [(0, "-short"), (30, "-tall")]


def shown_after_paint(screen: Screen[Any]) -> None:
    """Note when ``screen``'s first frame has been painted (its first refresh)."""

    def painted() -> None:
        if isinstance(screen, AsksFirst):
            screen.shown_at = time.monotonic()

    screen.call_after_refresh(painted)


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
