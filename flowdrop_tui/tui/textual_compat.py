"""Every Textual private name the UI uses, each behind one function saying why.

Textual has no public API for these; a Textual upgrade (it is pinned exactly, STYLE
habit 13) must look here first. Each was checked against Textual 8.2.8.
``tests/unit/test_textual_compat.py`` keeps every other module of ``tui/`` off
Textual's private names.

A handler of the UI never overrides a private one (``App._on_key``, ``Input._on_key``,
``App._on_notify``): it declares ``@on(events.Key)`` / ``@on(Notify)``. Textual
dispatches a class's decorated handlers before its base classes' handlers, and
``prevent_default()`` keeps the base class's from running.
"""

from __future__ import annotations

from typing import Any

from textual import events
from textual.app import App
from textual.binding import BindingsMap
from textual.dom import DOMNode
from textual.notifications import Notification
from textual.widget import Widget
from textual.widgets import DataTable


def merged_bindings(owner: type[DOMNode]) -> BindingsMap:
    """``owner``'s bindings merged with those it inherits, without an instance: help
    and the command palette list the main screen's keys from the classes themselves
    (``DOMNode._merge_bindings``, a classmethod; 8.2.8)."""
    return owner._merge_bindings()


def forward_event(widget: Widget, event: events.Event) -> None:
    """Send a key on to ``widget`` marked as forwarded, as the app does when it hands
    a key to the focused widget, so it is not aimed again (``Widget._forward_event``;
    8.2.8). ``post_message`` alone would leave it looking fresh from the terminal."""
    widget._forward_event(event)


def scroll_cursor_into_view(table: DataTable[Any]) -> None:
    """Scroll a rebuilt table so its cursor row shows, without moving the cursor:
    ``move_cursor`` would post a highlight message (``DataTable._scroll_cursor_into_view``;
    8.2.8)."""
    table._scroll_cursor_into_view()


def shown_notifications(app: App[Any]) -> list[Notification]:
    """The notifications on screen, oldest first: the app coalesces its toasts and
    Textual exposes only adding one or clearing all (``App._notifications``; 8.2.8)."""
    return list(app._notifications)


def withdraw_notification(app: App[Any], notification: Notification) -> None:
    """Take one notification away without refreshing the toasts: the new one about
    to be added refreshes them (``App._unnotify(…, refresh=False)``; 8.2.8)."""
    app._unnotify(notification, refresh=False)
