"""Liveness and exclusion, exact and kill-proof.

A live run holds a POSIX record lock (``fcntl``/``lockf``) on its ``live.lock``,
and on its key's lock file while it runs that key. The kernel drops these locks
when the process dies, however it dies, so liveness is never stale after
``kill -9`` and never fooled by a reused pid. POSIX record locks are owned by
the *process* and are not inherited across ``fork``: a backend or child process
the run starts can never keep a killed run looking alive.

The price of POSIX locks: closing *any* descriptor of a locked file in the
owning process releases the lock. So this module keeps a registry of the locks
this process holds and never opens those files again while they are held.
Liveness is read with ``F_GETLK``, which asks without taking a lock, so a
viewer can never make a starting run's lock attempt fail.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import struct
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from flowdrop_tui.core.errors import LockTimeoutError
from flowdrop_tui.core.files.atomic import open_fd
from flowdrop_tui.core.files.regular import read_regular
from flowdrop_tui.core.paths import refuse_link

# struct flock on Linux: short l_type, short l_whence, off_t l_start, off_t l_len, pid_t l_pid.
_FLOCK = "hhqqi" + "x" * 4

_held: dict[str, int] = {}  # resolved path -> fd, for locks this process holds
_held_guard = threading.Lock()


class LockHeld(Exception):
    """The lock is held by another process (or by this one)."""


def _key(path: Path) -> str:
    return os.path.realpath(path)


def acquire(path: Path, *, content: str | None = None) -> int:
    """Take an exclusive lock on ``path`` without waiting; write ``content`` into it.

    Raises ``LockHeld`` when another process (or this one) holds it.
    """
    key = _key(path)
    with _held_guard:
        if key in _held:
            raise LockHeld(key)
        # O_NOFOLLOW: the holder writes into the file it locks; never through a link.
        # Never fd 0-2 (files/atomic.py open_fd): a flow that closed its stdout would write
        # into the lock file.
        fd = open_fd(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW)
        try:
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            if exc.errno in (errno.EACCES, errno.EAGAIN):
                raise LockHeld(key) from exc
            raise
        _held[key] = fd
    if content is not None:
        os.ftruncate(fd, 0)
        os.pwrite(fd, content.encode(), 0)
    return fd


def rekey(old: Path, new: Path) -> None:
    """After renaming a folder holding a lock this process holds, track it by its new path."""
    with _held_guard:
        fd = _held.pop(_key(old), None)
        if fd is not None:
            _held[_key(new)] = fd


def write_content(path: Path, content: str) -> None:
    """Replace what a held lock file says (the run id holding a key)."""
    with _held_guard:
        fd = _held[_key(path)]
    os.ftruncate(fd, 0)
    os.pwrite(fd, content.encode(), 0)


def release(path: Path) -> None:
    """Let go of a lock this process holds (closing the descriptor drops it)."""
    with _held_guard:
        fd = _held.pop(_key(path), None)
    if fd is not None:
        os.close(fd)


def holds(path: Path) -> bool:
    with _held_guard:
        return _key(path) in _held


def holder_pid(path: Path) -> int | None:
    """The pid of the process holding ``path``'s lock, or ``None`` when nobody does."""
    if holds(path):
        return os.getpid()
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)  # a FIFO: no wait
    except OSError:
        return None
    try:
        query = struct.pack(_FLOCK, fcntl.F_WRLCK, os.SEEK_SET, 0, 0, 0)
        answer = fcntl.fcntl(fd, fcntl.F_GETLK, query)
        l_type, _, _, _, pid = struct.unpack(_FLOCK, answer)
        return None if l_type == fcntl.F_UNLCK else pid
    finally:
        os.close(fd)


def read_content(path: Path) -> str:
    """What the holder wrote into a lock file (a run id), or ``""``."""
    if holds(path):
        with _held_guard:
            fd = _held[_key(path)]
        return os.pread(fd, 256, 0).decode(errors="replace").strip()
    try:
        return read_regular(path, 4096).decode(errors="replace").strip()
    except OSError:
        return ""


class LockTimeout(LockTimeoutError):
    """A lock still held by another process when the wait for it ran out."""

    def __init__(self, path: Path, waited: float, holder: int | None) -> None:
        who = f"process {holder}{_command_of(holder)}" if holder else "another process"
        super().__init__(
            f"{path} is held by {who} for more than {waited:g} s (stopped with Ctrl-Z? "
            "continue it with `fg`, or end it)"
        )
        self.path = path
        self.holder = holder


def _command_of(pid: int | None) -> str:
    """`` (flowdrop-tui reindex)``: what the process is, when /proc says."""
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return ""
    words = [w.decode(errors="replace") for w in argv if w]
    if words:
        words[0] = os.path.basename(words[0])
    if len(words) > 2 and words[1:3] == ["-m", "flowdrop_tui"]:
        words = ["flowdrop-tui", *words[3:]]
    text = " ".join(" ".join(words).split())
    return f" ({text[:80]})" if text else ""


def flock_holder(path: Path) -> int | None:
    """The pid holding a ``flock`` on ``path`` (from ``/proc/locks``), or ``None``."""
    try:
        info = os.stat(path)
        table = Path("/proc/locks").read_text()
    except OSError:
        return None
    where = f"{os.major(info.st_dev):02x}:{os.minor(info.st_dev):02x}:{info.st_ino}"
    for line in table.splitlines():
        fields = line.split()
        # "1: FLOCK  ADVISORY  WRITE 4242 08:02:1234 0 EOF"; waiters are marked "->"
        if len(fields) >= 6 and fields[1] == "FLOCK" and fields[5] == where:
            with contextlib.suppress(ValueError):
                return int(fields[4])
    return None


@contextmanager
def exclusive(path: Path, *, wait: float | None = None) -> Iterator[None]:
    """A short critical section between processes and threads (``flock``).

    Used for the index, whose lock is only ever held for a read-modify-write: a
    separate open file description per entry makes threads exclude each other too.
    ``wait``: how long to wait for it before raising ``LockTimeout`` naming the
    holder (a holder stopped with Ctrl-Z would otherwise block every caller for
    good); ``None`` waits as long as it takes.
    """
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o644)
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # a link planted in its place: refused, naming it
            refuse_link(path)
        raise
    try:
        if wait is None:
            fcntl.flock(fd, fcntl.LOCK_EX)
        else:
            _flock_within(fd, path, wait)
        yield
    finally:
        os.close(fd)


def _flock_within(fd: int, path: Path, wait: float) -> None:
    deadline = time.monotonic() + wait
    pause = 0.001
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            pass
        left = deadline - time.monotonic()
        if left <= 0:
            raise LockTimeout(path, wait, flock_holder(path))
        time.sleep(min(pause, left))
        pause = min(pause * 2, 0.01)  # the lock is held for milliseconds: look soon
