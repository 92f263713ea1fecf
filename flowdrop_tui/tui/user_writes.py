"""The UI's worker threads, and what the user asked them to write: quitting waits for
those writes, and for nothing else (docs/decisions.md, "Quitting the UI").

Textual runs a thread worker on the event loop's default executor, and Python joins
its threads before the process ends: ``q`` waited for whatever read was under way (a
cold size count of 100,000 runs, a flow that hangs when described). ``Executor`` is
that executor, installed when the app loads: its ``shutdown`` never waits, and it
counts the work marked ``user_write`` — a key that starts, stops, pauses, resumes,
answers, raises a budget, dismisses or prunes — from the moment it is handed over
until it is done (or cancelled before it began, as Textual cancels a worker that had
not started when the app closed). ``wait`` holds the exit until that count is zero;
the command then leaves without teardown (``app.run_app``), its reads abandoned.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])

_done = threading.Condition()
_in_flight = 0


def user_write(work: F) -> F:
    """Mark ``work`` (a worker's function) as a write the user asked for."""
    work.__dict__["user_write"] = True
    return work


def _is_user_write(args: tuple[Any, ...]) -> bool:
    """Textual submits ``runner(work)``; ``work`` is the method, or a partial of it."""
    work = args[0] if args else None
    return bool(getattr(getattr(work, "func", work), "user_write", False))


def _finished(_: Future[Any]) -> None:
    global _in_flight
    with _done:
        _in_flight -= 1
        _done.notify_all()


class Executor(ThreadPoolExecutor):
    """The event loop's default executor while the UI runs (see the module's words)."""

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        global _in_flight
        if not _is_user_write(args):
            return super().submit(fn, *args, **kwargs)
        with _done:
            _in_flight += 1
        try:
            future = super().submit(fn, *args, **kwargs)
        except BaseException:
            _finished(Future())
            raise
        future.add_done_callback(_finished)
        return future

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        super().shutdown(wait=False, cancel_futures=cancel_futures)


def in_flight() -> int:
    with _done:
        return _in_flight


def wait() -> None:
    """Until no write the user asked for is queued or running."""
    with _done:
        _done.wait_for(lambda: _in_flight == 0)
