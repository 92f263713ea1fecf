"""Is this run alive? The one answer (SPEC §4: exact, not fooled by a reused pid).

The process that holds a run holds a POSIX record lock on its ``live.lock`` from
before the record appears until it ends. The kernel drops the lock when that
process dies however it dies (``kill -9`` included), so "someone holds it" is
exactly "the run is alive", and ``F_GETLK`` names the holder.
"""

from __future__ import annotations

from pathlib import Path

from flowdrop_tui.core.files import locks
from flowdrop_tui.core.paths import LIVE_LOCK


def live_pid(run_dir: Path) -> int | None:
    """The pid of the process holding the run in ``run_dir``, or None when nobody does."""
    return locks.holder_pid(run_dir / LIVE_LOCK)


def is_live(run_dir: Path) -> bool:
    return live_pid(run_dir) is not None
