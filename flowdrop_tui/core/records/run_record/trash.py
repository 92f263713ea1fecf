"""Deleting a run's record so that a kill at any instant leaves it whole or gone.

A run leaves in three steps: its folder is renamed into ``.flowdrop/trash/`` (one
atomic ``rename``, done by ``prune`` under the index lock), then the transcripts
flowdrop keeps for it (``.flowdrop/transcripts/``, found through the links in
its ``sessions/``) are unlinked, then the trashed folder is removed. Readers list
only ``runs/<run-id>`` names, so from the rename on the run is gone for all of
them; whatever a kill leaves in ``trash/`` is finished by the next ``prune`` or
``reindex`` (``sweep``). Nothing outside ``.flowdrop/`` is ever deleted, and no
link is followed to delete: a link to an agent's own transcript goes with the
folder, its target stays.
"""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import stat
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING

from flowdrop_tui.core.files.atomic import open_fd, sync_dir
from flowdrop_tui.core.paths import RUN_ID_RE, SESSIONS, Layout

if TYPE_CHECKING:
    import ctypes


def keeps_transcripts(layout: Layout) -> bool:
    """Whether ``.flowdrop/transcripts`` is a real folder of ours: when it is a link
    (to somewhere else), nothing in it is deleted."""
    return layout.transcripts.is_dir() and not layout.transcripts.is_symlink()


def own_transcript(layout: Layout, run_id: str, link: str) -> Path | None:
    """The transcript under ``.flowdrop/transcripts/`` a session link of ``run_id`` names,
    read as text and resolved against where the run's ``sessions/`` was, never followed;
    ``None`` for a link pointing anywhere else (an agent's own transcript)."""
    base = layout.runs / run_id / SESSIONS
    target = Path(os.path.normpath(os.path.join(base, link)))
    if target.parent != Path(os.path.normpath(layout.transcripts)):
        return None
    if target.name in ("", ".", ".."):
        return None
    return target


def linked_transcripts(layout: Layout, folder: Path, run_id: str) -> list[Path]:
    """The transcripts under ``.flowdrop/transcripts`` that a record folder links to."""
    found = []
    try:
        entries = list(os.scandir(folder / SESSIONS))
    except OSError:
        return []
    for entry in entries:
        if not entry.is_symlink():
            continue
        try:
            link = os.readlink(entry.path)
        except OSError:
            continue
        target = own_transcript(layout, run_id, link)
        if target is not None:
            found.append(target)
    return found


def discard(layout: Layout, run_id: str) -> bool:
    """Move a run's folder into the trash (call under the index lock); False when gone.

    The rename is the instant the run stops existing for every reader. Refused
    (``LinkRefusedError``) when ``runs/`` or ``trash/`` is a link: the run would be
    moved out of ``.flowdrop/`` (a run folder that is itself a link moves as the link)."""
    layout.inside(layout.runs)
    layout.folder(layout.trash)
    place = layout.trash / run_id
    if os.path.lexists(place):
        _remove(place)  # a leftover of the same name is garbage by construction
    try:
        os.rename(layout.runs / run_id, place)
    except FileNotFoundError:
        return False
    return True


def purge(layout: Layout, name: str) -> int:
    """Delete a trashed run: its kept transcripts first, then its folder. Returns the
    number of transcripts removed. Safe to repeat after a kill at any point. Refused
    (``LinkRefusedError``) when ``trash/`` is a link: what it points to is not ours."""
    place = layout.inside(layout.trash) / name
    removed = 0
    if RUN_ID_RE.match(name) and keeps_transcripts(layout) and not place.is_symlink():
        for transcript in linked_transcripts(layout, place, name):
            try:
                transcript.unlink()  # a link in transcripts/ is removed, never followed
                removed += 1
            except FileNotFoundError:
                pass
            except OSError:
                continue
    _remove(place)
    return removed


def _remove(place: Path) -> None:
    if place.is_symlink() or not place.is_dir():
        with contextlib.suppress(FileNotFoundError):
            place.unlink()
        return
    shutil.rmtree(place, ignore_errors=True)  # never follows links (fd-based on Linux)


def leftovers(layout: Layout) -> list[str]:
    """What a killed prune left in the trash."""
    try:
        return sorted(os.listdir(layout.trash))
    except OSError:
        return []


# Removing a folder waits on the disk (``rmdir`` measured 2 ms on an ext4 mounted
# with ``discard``), not on the CPU: several at once overlap those waits (17× faster
# with 8 threads on that disk; bench/README.md, "prune").
PURGE_THREADS = 8


def purge_all(layout: Layout, names: Iterable[str]) -> None:
    """``purge`` each name, several at once."""
    with ThreadPoolExecutor(PURGE_THREADS, thread_name_prefix="purge") as pool:
        for _ in pool.map(lambda name: purge(layout, name), names):
            pass


def sweep(layout: Layout) -> int:
    """Finish deleting whatever a killed prune left in the trash; returns how many.

    Refused (``LinkRefusedError``, naming it) when ``trash/`` is a link: everything in
    the folder it points to would be deleted."""
    layout.inside(layout.trash)
    names = leftovers(layout)
    if names:
        purge_all(layout, names)
    return len(names) + sweep_strays(layout)


def strays(layout: Layout) -> list[str]:
    """Plain files under ``runs/`` named as a run: never a record (a record is a folder).

    What a power cut on a filesystem without a journal leaves when a run's folder was
    deleted before its name's removal reached the disk: the name comes back pointing
    at the inode, reused since for another file (a run list, say). Never read as a run
    (``run_fold.list_run_ids`` skips them)."""
    try:
        entries = list(os.scandir(layout.runs))
    except OSError:
        return []
    found = []
    for entry in entries:
        if RUN_ID_RE.match(entry.name) is None:
            continue
        with contextlib.suppress(OSError):
            if stat.S_ISREG(entry.stat(follow_symlinks=False).st_mode):
                found.append(entry.name)
    return found


def sweep_strays(layout: Layout) -> int:
    """Remove ``strays`` (by ``prune`` and ``reindex``); how many went. Only the name is
    removed: a file it shares an inode with (``e2fsck`` counts both names) stays."""
    names = strays(layout)
    if not names:
        return 0
    layout.inside(layout.runs)
    for name in names:
        with contextlib.suppress(FileNotFoundError):
            (layout.runs / name).unlink()
    sync_dir(layout.runs)
    return len(names)


def sync_moved(layout: Layout) -> None:
    """Make runs just moved into the trash gone from ``runs/`` on disk, before their
    folders are deleted: without a journal (ext2) a removal that reached the disk
    before the rename did had a power cut bring back the run's name, pointing at an
    inode reused since (a plain file holding a run list), and its folders in
    ``lost+found``."""
    sync_dir(layout.runs)
    sync_dir(layout.trash)


def sync_all(layout: Layout) -> None:
    """Everything deleted so far on disk (the freed inodes and blocks, the folders'
    names): a finished prune is what a power cut right after it leaves (``syncfs`` of
    the records' filesystem; ``sync`` where there is none)."""
    fd = open_fd(layout.root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        syncfs = _syncfs()
        if syncfs is None or syncfs(fd) != 0:
            os.sync()
    finally:
        os.close(fd)


@functools.cache
def _syncfs() -> ctypes._NamedFuncPointer | None:
    """libc's ``syncfs``, found the first time a prune finishes: ``find_library`` runs
    ``ldconfig`` in a child process, which no import of this module should pay (the
    UI imports it through the index, before its first frame)."""
    import ctypes
    import ctypes.util

    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True).syncfs
    except (OSError, AttributeError):
        return None  # not Linux: sync() instead
