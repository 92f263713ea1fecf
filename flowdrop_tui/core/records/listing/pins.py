"""Pinned runs: ``pin RUN`` keeps a run from ever being pruned (SPEC §16).

A pin is an empty file ``.flowdrop/pins/<run-id>``, never a field in the run's
record: a record is written only by the process that holds the run (SPEC §4).
Pinning and pruning exclude each other through the index lock (``prune`` moves
runs away only while holding it, checking each run's pin just before), so a pin
that ``pin`` reports as taken is a run that stays.
"""

from __future__ import annotations

import os

from flowdrop_tui.core.errors import LinkRefusedError, NotFoundError, RecordsUnwritableError
from flowdrop_tui.core.files import locks
from flowdrop_tui.core.files.atomic import full_sync, sync_dir
from flowdrop_tui.core.paths import RUN_ID_RE, Layout, check_run_ref
from flowdrop_tui.core.records.listing.index import WRITE_WAIT


def _checked(layout: Layout, run_id: str) -> None:
    if not check_run_ref(run_id) or not (layout.runs / run_id).is_dir():
        raise NotFoundError(f"no run {run_id} in {layout.runs} (see: flowdrop-tui runs)")


def pin(layout: Layout, run_id: str) -> bool:
    """Pin a run; returns False when it was pinned already."""
    layout.ensure()
    # A deadline, naming the holder: a process stopped with Ctrl-Z holding the lock had
    # `pin` wait silently for good (`run` and `reindex` already waited so).
    with locks.exclusive(layout.index_lock, wait=WRITE_WAIT):
        _checked(layout, run_id)
        path = layout.inside(layout.pins) / run_id  # never through a link at pins/
        if os.path.lexists(path):
            return False
        try:
            layout.folder(layout.pins)
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
            fd = os.open(path, flags, 0o644)
            try:  # durable before it is reported: a lost pin is a run the next prune deletes
                full_sync(fd)  # the file itself before its name (ext2: docs/reliability.md)
            finally:
                os.close(fd)
            sync_dir(layout.pins)
            sync_dir(layout.root)  # (pins/ itself may have been made just now)
        except FileExistsError:
            return False
        except LinkRefusedError:
            raise
        except OSError as exc:
            raise RecordsUnwritableError(
                f"cannot pin {run_id}: cannot write {path}: {exc.strerror or exc}"
            ) from exc
    return True


def unpin(layout: Layout, run_id: str) -> bool:
    """Unpin a run; returns False when it was not pinned. A pin left by a run that is
    gone can be removed too (it names no run, so nothing is checked)."""
    check_run_ref(run_id)
    path = layout.inside(layout.pins) / run_id  # a link at pins/<run> itself may go
    if not os.path.lexists(path):
        _checked(layout, run_id)  # an unknown run is an error, a known unpinned one is not
        return False
    try:
        path.unlink()
    except FileNotFoundError:
        return False
    except OSError as exc:
        raise RecordsUnwritableError(
            f"cannot unpin {run_id}: cannot remove {path}: {exc.strerror or exc}"
        ) from exc
    return True


def is_pinned(layout: Layout, run_id: str) -> bool:
    return os.path.lexists(layout.pins / run_id)


def pinned(layout: Layout) -> set[str]:
    """Every pinned run id (one ``listdir``; pins of runs that are gone included)."""
    try:
        names = os.listdir(layout.pins)
    except OSError:
        return set()
    return {name for name in names if RUN_ID_RE.match(name)}
