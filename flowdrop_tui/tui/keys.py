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
"""

from __future__ import annotations

from typing import Any

from textual import events
from textual.app import App
from textual.dom import DOMNode
from textual.widget import Widget

from flowdrop_tui.tui.textual_compat import forward_event


class AimedKey(events.Key):
    """A key and the node it was sent to."""

    __slots__ = ["aimed_at"]

    def __init__(self, key: str, character: str | None, aimed_at: DOMNode) -> None:
        super().__init__(key, character)
        self.aimed_at = aimed_at


AimedKey.handler_name = "on_key"  # handled as the key it is, by every key handler


def aim(app: App[Any], event: events.Key) -> events.Key:
    """The key from the terminal, marked with where the app is about to send it."""
    return AimedKey(event.key, event.character, app.focused or app.screen)


def send_on(app: App[Any], event: events.Key, here: DOMNode | None = None) -> bool:
    """Send ``event``, sent to ``here`` (or as it says), on to where focus is now if
    that moved. True when it was sent on (the caller must then not act on it)."""
    now: Widget = app.focused or app.screen
    aimed = event.aimed_at if isinstance(event, AimedKey) else here
    if aimed is None or aimed is now:
        return False
    event.prevent_default()
    event.stop()
    forward_event(now, AimedKey(event.key, event.character, now))
    return True
