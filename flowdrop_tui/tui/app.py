"""The app: wiring, app-wide keys, and the one error handler (the workspace watch is the
main screen's, made after its first frame: main_parts.py).

The workspace's mode (``core/mode.py``) is chosen once, when the app starts, and
every key that acts on a run asks it. Where the mode has a live feed (remote mode:
the replica following PostgreSQL, docs/remote.md), the app runs it while it is open:
other machines' writes land in the replica's files, and the workspace watch sees
them as it sees local runs'."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from textual import events, on, work
from textual.app import App, SystemCommand
from textual.binding import Binding, BindingType
from textual.notifications import Notify
from textual.screen import Screen
from textual.worker import Worker

from flowdrop_tui.core import child_read
from flowdrop_tui.core.errors import FlowdropError
from flowdrop_tui.core.paths import Layout
from flowdrop_tui.tui import user_writes
from flowdrop_tui.tui.error_reports import report_worker
from flowdrop_tui.tui.keys import AimedKey, aim, send_on, too_early
from flowdrop_tui.tui.screens.main_screen import MainScreen
from flowdrop_tui.tui.textual_compat import (
    merged_bindings,
    shown_notifications,
    withdraw_notification,
)
from flowdrop_tui.tui.widgets.flow_table import FlowTable

if TYPE_CHECKING:
    from flowdrop_tui.core.mode import LiveFeed, Mode

NOTICE_EVERY = 5.0  # seconds between the open UI's looks at the inbox (SPEC §21)


def listed(binding: Binding) -> bool:
    """Whether help and the command palette list a binding: what the footer shows, and
    what it leaves out only for room (it carries a tooltip; ``m`` has none: help's
    words say it)."""
    return bool(binding.description) and (binding.show or bool(binding.tooltip))


TOASTS_SHOWN = 2  # at most this many notifications at once: the newest replace the oldest


class FlowdropApp(App[int]):
    """``flowdrop-tui`` in a workspace: every flow in it, from the keyboard."""

    NOTIFICATION_TIMEOUT = 5

    CSS_PATH = Path(__file__).with_name("flowdrop.tcss")  # absolute: subclasses live elsewhere
    TITLE = "flowdrop-tui"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding(
            "question_mark",
            "help",
            "Help",
            id="help",
            key_display="?",
            tooltip="Every key, and what pick up and resume mean",
        ),
        Binding(
            "i",
            "inbox",
            "Inbox",
            id="inbox",
            tooltip="What waits on you: questions, budgets reached, stalled or failed runs",
        ),
        Binding("q", "quit", "Quit", id="quit", tooltip="Quit; runs keep going in the background"),
    ]

    def __init__(self, layout: Layout, mode: Mode | None = None) -> None:
        """``mode``: the one the command chose; else chosen here, once."""
        super().__init__()
        if mode is None:
            from flowdrop_tui.core.mode import choose

            mode = choose(layout)
        self.workspace = layout
        self.mode: Mode = mode
        self.live_replica: LiveFeed | None = None
        self._replica_problem: str | None = None
        self._inbox_seen: set[str] = set()
        self._inbox_rang = False  # what waited before the UI opened rings nothing

    def get_default_screen(self) -> Screen[None]:
        return MainScreen(self.mode)

    def on_load(self) -> None:
        # Before any worker: thread workers run on an executor whose shutdown never
        # waits, so that closing never joins a read still under way (user_writes.py).
        asyncio.get_running_loop().set_default_executor(user_writes.Executor())

    # -- a live feed (remote mode: the replica follows PostgreSQL) while the app is open ----

    def on_mount(self) -> None:
        # SPEC §21: while the UI is open it is a viewer that notices (a died run's
        # notices; in remote mode none: the worker holding a run sends them) and, with
        # [notify] terminal = true, rings for what newly waits
        self.set_interval(NOTICE_EVERY, self._look_at_inbox)
        self.live_replica = self.mode.live_feed()
        if self.live_replica is None:
            return
        self.live_replica.start()
        self.set_interval(1.0, self._check_replica)

    def _check_replica(self) -> None:
        """Say once when the replica stopped following (and once when it is back)."""
        if self.live_replica is None:
            return
        problem = self.live_replica.problem()
        if problem != self._replica_problem:
            self._replica_problem = problem
            if problem is not None:
                self.notify(problem, title="Live updates stopped", severity="error")
            else:
                self.notify("following the remote store again", title="Live updates")

    @work(thread=True, exclusive=True, group="inbox-look", exit_on_error=False)
    def _look_at_inbox(self) -> None:
        from flowdrop_tui.core.control import notify

        try:
            found = {item["id"] for item in self.mode.inbox()}
        except (OSError, FlowdropError):
            return
        new, self._inbox_seen = found - self._inbox_seen, found
        if new and self._inbox_rang and notify.settings(self.workspace).terminal:
            self.call_from_thread(self.bell)
        self._inbox_rang = True

    def stop_replica(self) -> None:
        replica, self.live_replica = self.live_replica, None
        if replica is not None:
            replica.stop()

    def on_unmount(self) -> None:
        self.stop_replica()

    def _main(self) -> MainScreen:
        for screen in self.screen_stack:
            if isinstance(screen, MainScreen):
                return screen
        raise LookupError("the main screen is not open")

    def on_app_focus(self, event: events.AppFocus) -> None:
        """Served to a browser, Textual's web driver starts the app blurred, before
        anything is focused, and so finds nothing to give the focus back to when the
        page gets it: land where the terminal UI opens (the screen's AUTO_FOCUS)."""
        screen = self.screen
        selector = screen.AUTO_FOCUS or self.AUTO_FOCUS
        if screen.focused is None and selector:
            for widget in screen.query(selector):
                if widget.focusable:
                    widget.focus(scroll_visible=False)
                    break

    # -- keys everywhere: help and the command palette list the same bindings -------------------

    def key_help(self) -> list[tuple[str, str, str]]:
        """(key, description, tooltip) for every key the main screen answers: those in the
        footer, and those kept out of it for room that carry a tooltip (``d``)."""
        from flowdrop_tui.tui.widgets.run_table import RunTable  # when help is first asked

        found: list[tuple[str, str, str]] = []
        for owner in (FlowTable, RunTable, MainScreen, FlowdropApp):
            for binding in merged_bindings(owner).key_to_bindings.values():
                for one in binding:
                    if listed(one):
                        found.append((self.get_key_display(one), one.description, one.tooltip))
        found.append(("ctrl+p", "Commands", "Search every command"))
        return found

    def action_inbox(self) -> None:
        from flowdrop_tui.tui.screens.inbox_screen import InboxScreen  # loaded when asked

        if not isinstance(self.screen, InboxScreen):
            self.push_screen(InboxScreen(self.mode))

    def action_help(self) -> None:
        from flowdrop_tui.tui.screens.help_screen import (
            HelpScreen,  # loaded when first asked, not at start
        )

        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen(self.key_help()))

    def action_prune(self) -> None:
        from flowdrop_tui.tui.screens.prune_modal import offer_prune  # loaded when asked

        offer_prune(self, self.mode)

    def get_system_commands(self, screen: Screen[object]) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        if not isinstance(screen, MainScreen):
            return
        from flowdrop_tui.tui.widgets.run_table import RunTable  # the palette: when opened

        yield SystemCommand(
            "Prune old runs",
            "Delete ended runs beyond the newest 20 of each flow; shows what would go first",
            self.action_prune,
        )
        for owner, prefix in ((FlowTable, ""), (RunTable, ""), (MainScreen, "screen.")):
            for bindings in merged_bindings(owner).key_to_bindings.values():
                for one in bindings:
                    if listed(one):
                        action = (
                            one.action
                            if one.action.startswith("screen.")
                            else (prefix + one.action)
                        )
                        yield SystemCommand(
                            f"{one.description} ({self.get_key_display(one)})",
                            one.tooltip or one.description,
                            partial(self.run_action, action),
                        )

    # -- keys go where focus is when they are handled (keys.py) ----------------------------------

    async def on_event(self, event: events.Event) -> None:
        if (
            isinstance(event, events.Key)
            and not isinstance(event, AimedKey)
            and not event.is_forwarded
        ):
            if too_early(self, event):
                return  # typed before the question on screen was painted: not its answer
            event = aim(self, event)
        await super().on_event(event)

    @on(events.Key)
    async def _send_on(self, event: events.Key) -> None:
        # Textual calls App's own key handler after this one unless the key is sent on.
        send_on(self, event)

    # -- notifications coalesce: the same words once, and no pile over the panes ---------------

    @on(Notify)
    def _coalesce(self, event: Notify) -> None:
        # Runs before App's own handler, which adds the new one and refreshes the toasts.
        new = event.notification
        for old in shown_notifications(self):
            if (old.message, old.title) == (new.message, new.title):
                withdraw_notification(self, old)
        shown = shown_notifications(self)
        for old in shown[: max(0, len(shown) - TOASTS_SHOWN + 1)]:
            withdraw_notification(self, old)

    # -- the one error handler ------------------------------------------------------------------

    @on(Worker.StateChanged)
    def _worker_failed(self, event: Worker.StateChanged) -> None:
        """The app's own workers (prune's); the main screen reports its own the same way."""
        report_worker(self, event)


def run_app(mode: Mode) -> int:
    """Open the terminal UI on ``mode``'s workspace (its live feed, if any, followed
    while open); returns the exit status once the terminal is restored and every write
    the user asked for is done. What is left — reads on worker threads, the children
    they started (told to stop here) — is abandoned: the caller leaves without teardown
    (``cli/serving.py``; docs/decisions.md, "Quitting the UI")."""
    app = FlowdropApp(mode.layout, mode)
    try:
        app.run()
    finally:
        app.stop_replica()
        user_writes.wait()
        child_read.stop_all()
    return int(app.return_code or 0)
