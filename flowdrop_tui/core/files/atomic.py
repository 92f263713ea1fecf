"""Replacing a file whole, atomically and durably — as often as every key set.

``write_atomic`` writes a new temporary file beside the target, syncs its bytes,
renames it over the target and syncs the folder. When it returns, the new file
is what the name says on disk: a reader, a kill or a power cut sees the old file
or the new one, never a torn one, and a power cut after it returns keeps it.

Why this is the durable writer everywhere (docs/decisions.md, "Durability"): an
in-place writer that rewrote two spare inodes and swapped them in was cheaper, but
its safety rested on a journal committing in order — ext2, ext3 and an ext4
without a journal report the same ``statfs`` magic and got it anyway, and a power
cut there published half of one save over half of another. The plain way needs no
journal (the bytes are synced before the rename, and the rename before we return).
A key set publishes ``state.json`` this same way without the syncs
(``durable=False``): its durability is the state log's (``records/flow_state/state_log.py``).

Reaching the disk: ``fsync`` on macOS hands the bytes to the drive, whose cache a
power cut empties; only ``fcntl(F_FULLFSYNC)`` asks the drive to write them. Every
sync meant to survive a power cut goes through ``full_sync`` or ``datasync`` here,
which ask for it where the platform has it.

Descriptors: a flow may close its stdout, and the next ``open`` would get fd 1,
where the flow's own ``os.write(1, …)`` (a thread, a library) would land in the
record. ``open_fd`` never hands out 0–2.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import stat
from pathlib import Path

_WRITE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC | os.O_NOFOLLOW
_FIRST_FREE = 3  # above stdin, stdout and stderr


def full_sync(fd: int) -> None:
    """``fsync`` that reaches the disk: ``F_FULLFSYNC`` where the platform has it (macOS,
    whose ``fsync`` stops at the drive's cache); a filesystem that refuses it is synced
    the plain way."""
    if not _drive_flush(fd):
        os.fsync(fd)


def datasync(fd: int) -> None:
    """``fdatasync`` (the file's bytes and size, not its times) that reaches the disk:
    ``F_FULLFSYNC`` where the platform has it, as ``full_sync``."""
    if not _drive_flush(fd):
        vars(os).get("fdatasync", os.fsync)(fd)  # macOS has no fdatasync


def _drive_flush(fd: int) -> bool:
    """``fcntl(fd, F_FULLFSYNC)``; whether it was made (looked up at each call: a test
    gives the constant to a platform without it). Looked up in the module's dict: a
    ``getattr`` that misses raises and catches an ``AttributeError`` inside, 1.5 µs of
    every key set's flush where the constant is missing (Linux)."""
    command = vars(fcntl).get("F_FULLFSYNC")
    if command is None:
        return False
    try:
        fcntl.fcntl(fd, command)
    except OSError:
        return False
    return True


def open_fd(path: Path | str, flags: int, mode: int = 0o644, *, dir_fd: int | None = None) -> int:
    """``os.open`` that never puts a file at fd 0, 1 or 2 (closed by the flow, maybe).

    Not even for an instant: a descriptor moved up after the fact would already have
    been fd 1 while another thread of the flow wrote there. So a standard descriptor
    found closed is first plugged with ``/dev/null`` (what a write to it then reaches).
    """
    _plug_standard_descriptors()
    fd = os.open(path, flags | os.O_CLOEXEC, mode, dir_fd=dir_fd)
    if fd >= _FIRST_FREE:
        return fd
    try:  # closed again between the plug and the open: move it up all the same
        return fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, _FIRST_FREE)
    finally:
        os.close(fd)


def _plug_standard_descriptors() -> None:
    for fd in range(_FIRST_FREE):
        try:
            fcntl.fcntl(fd, fcntl.F_GETFD)
        except OSError:
            null = os.open(os.devnull, os.O_RDWR)  # the lowest free descriptor: this one
            if null >= _FIRST_FREE:
                os.close(null)


def sync_dir(folder: Path | str) -> None:
    """Make the names in ``folder`` (a rename, a new file, a removal) durable."""
    fd = open_fd(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        full_sync(fd)
    finally:
        os.close(fd)


def sync_entry(path: Path | str) -> None:
    """Make a new file or folder itself durable, before the name that points at it.

    On a filesystem without a journal (ext2) a name made durable before its inode
    comes back after a power cut naming whatever that inode held before, and
    ``e2fsck`` keeps it so: a ``live.lock`` that is a folder refused the next run.
    """
    fd = open_fd(path, os.O_RDONLY | os.O_NOFOLLOW)
    try:
        full_sync(fd)
    finally:
        os.close(fd)


def remove_file(path: Path | str) -> None:
    """Remove ``path``, a file whose content is kept elsewhere, durably — its blocks
    given back first: emptied, unlinked, then synced (the file, then its folder), so
    that its inode, should a power cut bring it back, claims no block.

    Without a journal (ext2) a removed file's blocks are handed out again at once, while
    its inode on disk can still list them until the kernel writes it back. A new folder
    took the freed indirect block of a removed ``state.log``, was synced, and after a
    power cut ``e2fsck`` read the folder's names as the old file's block numbers,
    "cleared" the illegal ones by writing zeros into that block, and left a folder it
    could not repair (exit 4, "Filesystem still has errors"). Emptied before the unlink,
    one ``fsync`` of the file commits both (a journal commits them together; ext2
    writes the inode), and the folder's sync has nothing left to commit.

    Only a regular file with no other name is emptied: a link, a FIFO or a device
    planted there is never opened, only its name removed, and an inode ``e2fsck`` gave
    back two names (one of them another file's) keeps its content. ``FileNotFoundError``
    is not an error; a folder there raises as ``os.unlink`` does. An I/O error while
    emptying never stops the removal.
    """
    folder = os.path.dirname(os.fspath(path)) or "."
    fd = -1
    try:
        if stat.S_ISREG(os.lstat(path).st_mode):
            fd = open_fd(path, os.O_WRONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        return
    except OSError:
        fd = -1  # not ours to open: its name is removed all the same
    try:
        emptied = False
        if fd >= 0:
            info = os.fstat(fd)
            if stat.S_ISREG(info.st_mode) and info.st_nlink == 1 and info.st_blocks:
                with contextlib.suppress(OSError):
                    os.ftruncate(fd, 0)
                    emptied = True
        try:
            os.unlink(path)
        except FileNotFoundError:
            return
        if emptied:
            with contextlib.suppress(OSError):
                full_sync(fd)  # the inode itself, and on ext4 the unlink in one commit
    finally:
        if fd >= 0:
            os.close(fd)
    sync_dir(folder)


def write_atomic(path: Path | str, data: bytes, *, durable: bool = True) -> None:
    """Replace ``path`` with ``data`` atomically; ``durable`` also makes it survive a power cut.

    One fixed temporary name per target (each file has one writer); ``fdatasync``
    rather than ``fsync`` (the new file's size is data, its timestamps are not).
    On a full disk the temporary file is removed at once, so a failed save holds
    no space.
    """
    _write_once(os.fspath(path), data, durable)


def _write_once(target: str, data: bytes, durable: bool) -> None:
    tmp = target + ".tmp"
    try:
        fd = open_fd(tmp, _WRITE_FLAGS)
    except OSError as exc:
        if exc.errno != errno.ELOOP:
            raise
        # A link where our temporary file goes: never write through it. The name is
        # ours alone, so the link itself is removed and a file of our own written.
        os.unlink(tmp)
        fd = open_fd(tmp, _WRITE_FLAGS)
    try:
        try:
            if not durable:
                _allocate(fd, len(data))
            _write_all(fd, data)
            if durable:
                datasync(fd)
        finally:
            os.close(fd)
        os.rename(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)  # a full disk: give its blocks back now
        raise
    if durable:
        sync_dir(os.path.dirname(target) or ".")


def _allocate(fd: int, size: int) -> None:
    """Give a file that will not be synced its blocks before it is written: ext4 (by
    default, ``auto_da_alloc``) otherwise allocates a renamed-over file's delayed
    blocks in the rename and starts their write-out there — 150 µs of a 200 µs publish
    on the development machine, against 90 µs in all this way (bench/README.md (a))."""
    if size:
        try:  # (not ``contextlib.suppress``: a tenth of the publish's Python time)
            os.posix_fallocate(fd, 0, size)
        except (OSError, AttributeError):  # not supported: written as is
            pass


def _write_all(fd: int, data: bytes) -> None:
    offset = os.pwrite(fd, data, 0)  # whole at once, as a small file almost always is
    if offset < len(data):
        view = memoryview(data)
        while offset < len(view):
            offset += os.pwrite(fd, view[offset:], offset)
