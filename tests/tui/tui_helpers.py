"""Driving the UI in tests: wait on what it shows (never sleep-and-hope), hear what it
says, and seed run records with fixed ids and times so screens are reproducible."""

from __future__ import annotations

from typing import Any, TypeVar

from textual.screen import Screen
from textual.worker import WorkerState

from flowdrop_tui.core.mode import Mode
from flowdrop_tui.core.paths import Layout
from flowdrop_tui.tui.app import FlowdropApp
from flowdrop_tui.tui.keys import AsksFirst
from flowdrop_tui.tui.screens.main_screen import MainScreen
from tests.waiting import until  # noqa: F401  (the one wait; the UI tests import it from here)


class RecordingApp(FlowdropApp):
    """The real app, remembering every notification it showed (toasts expire)."""

    def __init__(self, layout: Layout, mode: Mode | None = None) -> None:
        super().__init__(layout, mode)
        self.said: list[str] = []

    def notify(self, message: str, **kwargs: Any) -> None:  # type: ignore[override]
        self.said.append(message)
        super().notify(message, **kwargs)

    @property
    def main_screen(self) -> MainScreen:
        return self._main()

    def heard(self, fragment: str) -> bool:
        return any(fragment in text for text in self.said)


ScreenT = TypeVar("ScreenT", bound=Screen[Any])


def asked(app: FlowdropApp, kind: type[ScreenT]) -> ScreenT | None:
    """The question of ``kind`` on screen once it has been painted: a key typed before
    that is not its answer (``keys.AsksFirst``), so a test types only after this."""
    screen = app.screen
    if isinstance(screen, kind) and isinstance(screen, AsksFirst) and screen.shown_at:
        return screen
    return None


def busy(app: FlowdropApp) -> bool:
    return any(
        worker.group != "watch" and worker.state in (WorkerState.PENDING, WorkerState.RUNNING)
        for worker in app.workers
    )


def settled(app: RecordingApp) -> bool:
    """Everything the screen reads at start is on it, and no read is in flight."""
    main = app.main_screen
    if not main.ready:
        return False  # the panes are still mounting their children
    rows = main.flows.rows_by_name
    if not rows or any(row.get("described") is False for row in rows.values()):
        return False
    if main.runs.key != main.selected_flow:
        return False
    if main.selected_run is not None and main.detail.extra is None:
        return False
    return not busy(app)
