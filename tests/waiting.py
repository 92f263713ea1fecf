"""Waiting in tests: poll a condition until it holds or a deadline passes, never
sleep-and-hope. One deadline loop (`_polls`) serves every wait — a thread's (`wait_for`),
the UI pilot's (`until`, which lets the app run between looks) — so a timeout reads the
same everywhere: how long, and what was awaited."""

from __future__ import annotations

import time
from collections.abc import Callable, Generator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from textual.pilot import Pilot


def _polls(
    predicate: Callable[[], Any], timeout: float, what: object, said: Callable[[], str]
) -> Generator[None, None, Any]:
    """Look at ``predicate()``; yield (the caller waits its way) until it is truthy, and
    return it. Past the deadline: an AssertionError naming ``what`` and ``said()``."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}{said()}")
        yield


def _nothing() -> str:
    return ""


def wait_for(
    predicate: Callable[[], Any], timeout: float = 20.0, interval: float = 0.05, what: str = ""
) -> Any:
    """Poll until ``predicate()`` is truthy and return it; fail naming ``what`` (else
    the predicate) after ``timeout`` seconds."""
    polls = _polls(predicate, timeout, what or predicate, _nothing)
    try:
        while True:
            next(polls)
            time.sleep(interval)
    except StopIteration as held:
        return held.value


async def until(
    pilot: Pilot[Any], predicate: Callable[[], Any], timeout: float = 40.0, what: str = ""
) -> Any:
    """Let the app run until ``predicate()`` holds; fail naming what was awaited and
    what the app said (a ``RecordingApp``'s notifications)."""

    def said() -> str:
        return f"; app said {getattr(pilot.app, 'said', [])}"

    polls = _polls(predicate, timeout, what or predicate, said)
    try:
        while True:
            next(polls)
            await pilot.pause(0.05)
    except StopIteration as held:
        return held.value
