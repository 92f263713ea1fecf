"""Replacing a file whole, atomically and durably — as often as every key set.

Two writers. ``write_atomic`` is the plain one: a new temporary file, its bytes
synced, then a rename over the target. ``AtomicFile`` gives the same guarantees
for a file one process rewrites over and over (a run's ``state.json``) at about
0.6 of the cost, by never allocating a new file in the hot path.

Why the plain way is slow (ext4, bench/state_write.py): syncing a *new* file
commits a journal transaction holding an inode allocation, a block allocation
and the previous file's release — about 0.33 ms a save, against about 0.2 ms
for LangGraph's ``SqliteSaver.put`` (WAL, ``synchronous=FULL``), whose commit is
one data sync of WAL blocks it already owns. ``AtomicFile`` costs about 0.2 ms:
one data write and one *small* journal commit. The commit cannot go: it is what
makes the previous save's rename durable, which both the "last save or the one
before" promise and the in-place rewrite below rest on.

How ``AtomicFile`` avoids it: three inodes take turns — the published file and
two spares (``.state.json.spare-0`` / ``-1`` beside ``state.json``). A save
rewrites the spare that is safe to reuse in place (``pwrite`` + ``ftruncate``
into blocks it already owns), ``fsync``s it, and swaps it with the published
file in one ``renameat2(RENAME_EXCHANGE)``; the old published inode becomes a
spare. The sync then commits a tiny transaction instead of an allocation.
The guarantees, and what each rests on:

- **New bytes reach the disk before they are published**: the ``fsync``
  returns before the exchange.
- **A power cut never exposes a torn file.** A spare is rewritten in place
  only once the exchange that unpublished it is committed, so on disk the
  name ``state.json`` can never point at an inode being rewritten. The commit
  comes from the save in between: its ``ftruncate`` dirties its inode *after*
  that exchange, so its ``fsync`` must commit a journal transaction at least
  that recent — hence three inodes, not two. This rests on the journal
  committing in order (ext4 — where a cross rename also rules out a fast
  commit — and XFS) and is vacuous on tmpfs; anywhere else the plain writer is
  used. A power cut loses at most the last save's exchange, as the plain
  writer loses at most its last rename.
- **A reader never sees a torn file**, even one that opened ``state.json``
  long ago and is still reading that inode: a spare is rewritten only under a
  write lease (``F_SETLEASE``), which the kernel grants only when no other
  descriptor of the file is open anywhere, and while it is held (until the
  file is published) another ``open`` of the file waits. Any doubt (a reader
  holds it, a second hard link, leases refused) and that save writes a
  brand-new inode instead.
- **A kill at any instant** leaves ``state.json`` naming a complete file: only
  unpublished spares are ever written.

``AtomicFile`` has one writer (the caller serializes saves); a new writer
(another process resuming the run) trusts nothing it finds and starts fresh.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import signal
import sys
from functools import cache
from pathlib import Path
from typing import Any

_WRITE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC | os.O_NOFOLLOW
_datasync = getattr(os, "fdatasync", os.fsync)  # macOS has no fdatasync

_EXT4 = 0xEF53
_XFS = 0x58465342
_TMPFS = 0x01021994
_ORDERED_FILESYSTEMS = frozenset({_EXT4, _XFS, _TMPFS})

_AT_FDCWD = -100
_RENAME_EXCHANGE = 2
# A lease is broken by another process's open, and the kernel tells the holder
# with a signal (SIGIO unless set otherwise, and SIGIO's default is to kill).
# SIGURG is ignored by default, so nobody needs a handler.
_LEASE_SIGNAL = signal.SIGURG
# Lease answers meaning "not here, ever": not supported, disabled, or not ours.
_NO_LEASES = frozenset({errno.EINVAL, errno.ENOLCK, errno.ENOSYS, errno.EACCES, errno.EPERM})


def write_atomic(path: Path | str, data: bytes, *, durable: bool = True) -> None:
    """Replace ``path`` with ``data`` atomically; ``durable`` syncs the bytes first.

    One fixed temporary name per target (each file has one writer), ``fdatasync``
    rather than ``fsync`` (the new file's size is data, its timestamps are not),
    and no directory sync — a power cut may lose the rename and keep the save
    before, but can never expose a torn file.
    """
    target = os.fspath(path)
    tmp = target + ".tmp"
    try:
        fd = os.open(tmp, _WRITE_FLAGS, 0o644)
    except OSError as exc:
        if exc.errno != errno.ELOOP:
            raise
        # A link where our temporary file goes: never write through it. The name is
        # ours alone, so the link itself is removed and a file of our own written.
        os.unlink(tmp)
        fd = os.open(tmp, _WRITE_FLAGS, 0o644)
    try:
        _write_all(fd, data)
        if durable:
            _datasync(fd)
    finally:
        os.close(fd)
    os.rename(tmp, target)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    offset = 0
    while offset < len(view):
        offset += os.pwrite(fd, view[offset:], offset)


class _Syscalls:
    """``renameat2`` and ``statfs`` from libc (Linux only; loaded once, on first use)."""

    def __init__(self) -> None:
        import ctypes  # here: a flow that never sets a key never pays for it

        libc = ctypes.CDLL(None, use_errno=True)
        self._ctypes = ctypes
        self._renameat2: Any = libc.renameat2  # AttributeError: glibc before 2.28
        self._renameat2.argtypes = [
            ctypes.c_int,
            ctypes.c_char_p,
            ctypes.c_int,
            ctypes.c_char_p,
            ctypes.c_uint,
        ]
        self._statfs: Any = libc.statfs
        self._statfs.argtypes = [ctypes.c_char_p, ctypes.c_void_p]

    def exchange(self, a: bytes, b: bytes) -> None:
        """Swap the names ``a`` and ``b`` in one atomic step."""
        if self._renameat2(_AT_FDCWD, a, _AT_FDCWD, b, _RENAME_EXCHANGE) != 0:
            code = self._ctypes.get_errno()
            raise OSError(code, os.strerror(code), os.fsdecode(a), None, os.fsdecode(b))

    def fs_type(self, path: bytes) -> int | None:
        """``statfs(2)``'s ``f_type``: the word at the start of ``struct statfs``."""
        buf = self._ctypes.create_string_buffer(512)  # larger than any struct statfs
        if self._statfs(path, buf) != 0:
            return None
        return self._ctypes.c_long.from_buffer(buf).value


@cache
def _syscalls() -> _Syscalls | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        return _Syscalls()
    except (OSError, AttributeError):
        return None


class AtomicFile:
    """One file replaced whole on every ``replace``, by one writer (see the module doc)."""

    def __init__(self, path: Path | str, *, swap: bool = True) -> None:
        """``swap=False`` always takes the plain writer."""
        self.path = os.fspath(path)
        folder, name = os.path.split(self.path)
        self._target = os.fsencode(self.path)
        self._spares = tuple(os.path.join(folder, f".{name}.spare-{i}") for i in (0, 1))
        # Per spare name: "ready" — it holds an inode whose unpublishing is
        # committed, so it may be rewritten in place; "pending" — unpublished by
        # our last exchange, not yet known to be committed.
        self._ready = [False, False]
        self._pending = [False, False]
        self._swapping: bool | None = None if swap else False  # None: decided on first use

    @property
    def swapping(self) -> bool:
        """Whether saves take the lean path (the plain writer otherwise)."""
        if self._swapping is None:
            calls = _syscalls()
            folder = os.path.dirname(self.path) or "."
            self._swapping = (
                calls is not None and calls.fs_type(os.fsencode(folder)) in _ORDERED_FILESYSTEMS
            )
        return self._swapping

    def discard_spares(self) -> None:
        """Remove the spares (the writer is done): they hold only superseded saves."""
        for spare in self._spares:
            with contextlib.suppress(OSError):
                os.unlink(spare)
        self._ready = [False, False]
        self._pending = [False, False]

    def replace(self, data: bytes) -> None:
        """Publish ``data`` as the whole file; its bytes are on disk before it is published."""
        calls = _syscalls() if self.swapping else None
        if calls is None:
            write_atomic(self.path, data)
            return
        turn = 0 if self._ready[0] else 1 if self._ready[1] else 1 if self._pending[0] else 0
        spare = self._spares[turn]
        try:
            swapped = self._save(calls, spare, data, reuse=self._ready[turn])
        except BaseException:
            self._ready = [False, False]  # trust nothing after a failure: start fresh
            self._pending = [False, False]
            raise
        # This save's fsync committed every exchange made before it.
        other = 1 - turn
        self._ready[other] = self._ready[other] or self._pending[other]
        self._pending[other] = False
        self._ready[turn] = False
        self._pending[turn] = swapped

    def _save(self, calls: _Syscalls, spare: str, data: bytes, *, reuse: bool) -> bool:
        """Write ``data`` into ``spare``, sync it, then publish it; whether it swapped."""
        fd = self._reusable(spare) if reuse else None
        leased = fd is not None
        if fd is None:
            # A brand-new inode under the spare's name. Unlinking the old one never
            # touches its blocks, so it is safe even before its unpublishing commits.
            with contextlib.suppress(FileNotFoundError):
                os.unlink(spare)
            fd = os.open(spare, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
        try:
            _write_all(fd, data)
            if leased:
                # Also what makes the fsync below commit the journal (see above):
                # a size change is a metadata change, even to the same size.
                os.ftruncate(fd, len(data))
            os.fsync(fd)
            return self._publish(calls, spare)
        finally:
            # Held until the file is published, so a reader that was waiting for
            # it reads what state.json now says, never a save ahead of it.
            if leased:
                fcntl.fcntl(fd, fcntl.F_SETLEASE, fcntl.F_UNLCK)
            os.close(fd)

    def _publish(self, calls: _Syscalls, spare: str) -> bool:
        """Swap ``spare`` in as the file; a plain rename when there is none yet."""
        try:
            calls.exchange(os.fsencode(spare), self._target)
        except OSError as exc:
            if exc.errno not in (errno.ENOENT, errno.EINVAL, errno.ENOSYS):
                raise
            if exc.errno != errno.ENOENT:  # this filesystem cannot swap: the plain way from now
                self._swapping = False
            os.rename(spare, self.path)  # the first save, or no exchange here
            return False
        return True

    def _reusable(self, spare: str) -> int | None:
        """The spare opened under a write lease, or ``None`` when it must not be rewritten."""
        try:
            fd = os.open(spare, os.O_RDWR | os.O_CLOEXEC | os.O_NOFOLLOW)
        except FileNotFoundError:
            return None
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                return None  # a link planted as a spare: never written through; replaced
            raise
        try:
            if os.fstat(fd).st_nlink == 1:  # a second name would see the rewrite
                fcntl.fcntl(fd, fcntl.F_SETSIG, _LEASE_SIGNAL)  # reset by every unlock
                fcntl.fcntl(fd, fcntl.F_SETLEASE, fcntl.F_WRLCK)
                return fd
        except OSError as exc:
            if exc.errno in _NO_LEASES:
                self._swapping = False  # no leases here: never rewrite in place
        os.close(fd)
        return None
