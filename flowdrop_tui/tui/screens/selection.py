"""What the main screen's parts see of it: the ``Selection`` protocol.

The parts (``LaunchActions``, ``StopActions``, ``WorkspaceReads``, ``OpenFiles``) each
hold the screen as a ``SelectionScreen``: where the cursors are, and the few things a
screen does for them — notify, post a message, run a worker. ``MainSelection``
(``main_selection.py``), which ``MainScreen`` is built on, implements it; a part never
sees the widgets.

Keys are answered from where the cursors are now: a key can arrive before the
highlight messages of the cursor moves that preceded it have been handled.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, Concatenate, ParamSpec, Protocol, TypeVar

from textual.app import App
from textual.message import Message
from textual.notifications import SeverityLevel
from textual.worker import Worker

from flowdrop_tui.core.mode import Mode
from flowdrop_tui.core.paths import Layout
from flowdrop_tui.core.records.run_record.run_info import RunInfo
from flowdrop_tui.tui.run_tracker import RunTracker


class Selection(Protocol):
    """The selected flow and run, as the keys see them."""

    @property
    def workspace(self) -> Layout: ...

    @property
    def mode(self) -> Mode:
        """The workspace's mode, chosen once at the app's start: every run action asks it."""

    @property
    def tracker(self) -> RunTracker: ...

    @property
    def selected_run(self) -> str | None:
        """The run the panes show (set once its highlight message is handled)."""

    def selected_flow_name(self) -> str | None:
        """The flow under the cursor now; None when there is none (or none shown)."""

    def selected_run_info(self) -> RunInfo | None:
        """The run under the cursor now, if it belongs to the selected flow."""

    def runs_of_selected_flow(self) -> list[RunInfo]:
        """The selected flow's runs as shown, newest first."""

    def no_flow_text(self) -> str:
        """Why no flow is selected, in words."""

    def lane_facts(self, key: str) -> dict[str, Any] | None:
        """What the lane list last read of lane ``key`` (``lanes --json``'s row), if it has."""

    def runs_not_shown_yet(self, retry: Callable[[], None]) -> bool:
        """True when the selected flow's runs are still being read: ``retry`` is then
        called once they are shown (a key typed right after moving the cursor acts on
        the runs of the flow the cursor is on, not on none)."""

    def read_runs_again(self, retry: Callable[[], None]) -> None:
        """Bring the records up to date (``Mode.sync``), read the selected flow's runs
        again and call ``retry`` once they are shown."""


class SelectionScreen(Selection, Protocol):
    """The selection, and the screen the parts answer through."""

    @property
    def app(self) -> App[Any]: ...

    def notify(
        self,
        message: str,
        *,
        title: str = "",
        severity: SeverityLevel = "information",
        timeout: float | None = None,
        markup: bool = True,
    ) -> None: ...

    def post_message(self, message: Message) -> bool: ...

    def run_worker(
        self,
        work: Callable[[], Any],
        name: str | None = "",
        group: str = "default",
        description: str = "",
        exit_on_error: bool = True,
        start: bool = True,
        exclusive: bool = False,
        thread: bool = False,
    ) -> Worker[Any]: ...


class Part(Protocol):
    """A part of the main screen: it holds the screen through the protocol."""

    screen: SelectionScreen


P = ParamSpec("P")
PartT = TypeVar("PartT", bound=Part)


def work_on_screen(
    *, group: str, thread: bool = False, exclusive: bool = False
) -> Callable[[Callable[Concatenate[PartT, P], Any]], Callable[Concatenate[PartT, P], Worker[Any]]]:
    """``textual.work`` for a part's method: the worker runs on the screen, as when the
    parts were the screen, so its groups, its cancelling on exit and its errors (the
    screen's ``Worker.StateChanged`` handler) are the screen's. Never exits on error."""

    def decorate(
        method: Callable[Concatenate[PartT, P], Any],
    ) -> Callable[Concatenate[PartT, P], Worker[Any]]:
        @functools.wraps(method)
        def start(part: PartT, /, *args: P.args, **kwargs: P.kwargs) -> Worker[Any]:
            shown = [repr(arg) for arg in args] + [f"{k}={v!r}" for k, v in kwargs.items()]
            return part.screen.run_worker(
                functools.partial(method, part, *args, **kwargs),
                name=method.__name__,
                group=group,
                description=f"{method.__name__}({', '.join(shown)})",
                exclusive=exclusive,
                exit_on_error=False,
                thread=thread,
            )

        return start

    return decorate
