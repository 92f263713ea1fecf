"""Is this run alive? The one answer (SPEC §4: exact, not fooled by a reused pid).

The process that holds a run holds a POSIX record lock on its ``live.lock`` from
before the record appears until it ends. The kernel drops the lock when that
process dies however it dies (``kill -9`` included), so "someone holds it" is
exactly "the run is alive", and ``F_GETLK`` names the holder.

A replica of remote records (``core/remote/replica.py``) has no holder on this
machine: its run folder holds ``remote-live.json`` while PostgreSQL says the run is
live on a worker, written and removed by the replica's sync only. That marker
counts as alive (its pid is the worker's, on another machine: ``local_pid`` is the
one to signal).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import orjson

from flowdrop_tui.core.files import locks
from flowdrop_tui.core.paths import LIVE_LOCK, REMOTE_LIVE

_MARKER_MAX = 64 * 1024


def live_pid(run_dir: Path) -> int | None:
    """The pid of the process holding the run in ``run_dir``, or None when nobody does
    (on this machine, or on a worker when ``run_dir`` is a replica's)."""
    pid = locks.holder_pid(run_dir / LIVE_LOCK)
    if pid is not None:
        return pid
    marker = remote_holder(run_dir)
    return marker["pid"] if marker is not None else None


def local_pid(run_dir: Path) -> int | None:
    """The pid of a process of *this* machine holding the run (the one to signal)."""
    return locks.holder_pid(run_dir / LIVE_LOCK)


def remote_holder(run_dir: Path) -> dict[str, Any] | None:
    """A replica's live marker: ``{pid, host, worker, key, epoch, since}``, or None
    when there is none (or it is not one the replica wrote)."""
    try:
        fd = os.open(run_dir / REMOTE_LIVE, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        data = orjson.loads(os.read(fd, _MARKER_MAX))
    except (OSError, orjson.JSONDecodeError):
        return None
    finally:
        os.close(fd)
    if not isinstance(data, dict) or type(data.get("pid")) is not int or data["pid"] <= 0:
        return None
    return data
