"""The one way the UI reports a failure: a notification, never a crash.

A failed worker is reported by ``report_worker``, from the ``Worker.StateChanged``
handler of the node it ran on (the app, the main screen); message handlers that turn
records into widgets are ``shielded``, so a record nobody foresaw shows as a
notification naming what could not be shown, and the app carries on.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

from textual.app import App
from textual.worker import Worker, WorkerState

from flowdrop_tui.core.errors import FlowdropError

F = TypeVar("F", bound=Callable[..., Any])


def report(app: App[Any], error: BaseException, what: str) -> None:
    """Show ``error`` (raised while doing ``what``) where the user looks."""
    if isinstance(error, FlowdropError):
        app.notify(error.message, severity="warning", markup=False, timeout=7)
        return
    app.notify(
        f"{type(error).__name__}: {error}",
        title=f"could not finish: {what}",
        severity="error",
        markup=False,
        timeout=7,
    )


def report_worker(app: App[Any], event: Worker.StateChanged) -> None:
    """A worker failed: say so where the user looks; the app carries on."""
    if event.state == WorkerState.ERROR and event.worker.error is not None:
        report(app, event.worker.error, event.worker.name or event.worker.group)


def shielded(handler: F) -> F:
    """Wrap a message handler so that its failure is reported, not fatal."""

    @functools.wraps(handler)
    def wrapper(self: Any, *args: Any) -> Any:
        try:
            return handler(self, *args)
        except Exception as error:
            report(self.app, error, handler.__name__.removeprefix("on_").replace("_", " "))
            return None

    return wrapper  # type: ignore[return-value]
