"""A read done in a child process for the UI, given up the moment it is no longer wanted.

The UI reads what is slow (a cold workspace's run sizes, git's facts) in a child
process so that it never holds the UI's GIL. Waiting on such a child with
``subprocess.run`` held the thread it ran on, and Python joins that thread before
it exits: ``q`` on a cold 100,000-run workspace waited ~45 s for the size count.
``child_output`` polls instead, and kills the child as soon as ``cancelled()`` says
the answer is no longer wanted (the UI's worker cancelled as the app closes).
"""

from __future__ import annotations

import contextlib
import subprocess
import threading
import time
from collections.abc import Callable

POLL = 0.1  # seconds between looks at ``cancelled``

_running: set[subprocess.Popen[bytes]] = set()  # children of reads not answered yet
_running_lock = threading.Lock()


def never() -> bool:
    return False


def child_output(
    command: list[str], timeout: float, cancelled: Callable[[], bool] = never
) -> bytes | None:
    """``command``'s standard output once it exits; ``None`` when it could not start,
    took longer than ``timeout`` seconds, or ``cancelled()`` turned true meanwhile (the
    child is then sent SIGTERM, on which the project's children leave at once)."""
    try:
        child = subprocess.Popen(
            command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
        )
    except OSError:
        return None
    with _running_lock:
        _running.add(child)
    deadline = time.monotonic() + timeout
    try:
        while True:
            if cancelled():
                return None
            try:
                out, _ = child.communicate(timeout=min(POLL, max(0.0, deadline - time.monotonic())))
                return out
            except subprocess.TimeoutExpired:
                if time.monotonic() >= deadline:
                    return None
    finally:
        with _running_lock:
            _running.discard(child)
        if child.poll() is None:
            # Told to stop, not waited for: it keeps what it learnt and leaves by itself
            # (the ledger saves on SIGTERM; ``subprocess`` reaps it later, init once the
            # UI has exited). Waiting here is what held the UI's quit.
            child.terminate()


def stop_all() -> None:
    """Send SIGTERM to every read's child still running: the process is leaving without
    waiting for the threads that poll them (the UI's quit, ``tui/app.py``)."""
    with _running_lock:
        children = list(_running)
    for child in children:
        if child.poll() is None:
            with contextlib.suppress(OSError):
                child.terminate()
