"""Publishing a file by rename at every save, without making a file at every save.

A run's ``state.json`` is replaced whole at every key set (the seed: "setting a key
writes the file again"), by a rename that is not synced: the run's state log is the
durable copy (``records/state_log.py``). Making the new file is what that costs:
allocating an inode and its blocks, and freeing the old file's when the rename drops
it — 100–180 µs of a key set on ext4, as much as the log's flush.

So that work is done while the log's flush waits on the disk, on a thread beside it
(``Beside``): the save's bytes go into a spare made at the previous save, the file the last publish
replaced is closed (its inode and blocks freed), and the next spare is made — a new,
empty file given its blocks (``fallocate`` keeping the size 0, so a write into it
allocates nothing and ext4's ``auto_da_alloc`` has nothing to flush in the rename).
When the flush is done, the rename alone is left.

Nothing published is ever written again: a spare is a new inode no reader has seen,
and a reader holding the old ``state.json`` goes on reading the old, whole file (it
is held open here so that its freeing waits for the next flush). The spares are
named ``<target>.next-<n>``; what a kill leaves of them is removed by
``remove_leftovers`` (the log's settling, a resumed run). A name planted where a
spare goes is never written through: it is created with ``O_EXCL | O_NOFOLLOW``.
"""

from __future__ import annotations

import contextlib
import errno
import os
import threading
from collections.abc import Callable
from pathlib import Path

from flowdrop_tui.core.files.atomic import open_fd

_BLOCK = 4096
_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
_FALLOC_KEEP_SIZE = 1  # linux/falloc.h: blocks given, the size left at 0


def spare_names(target: Path) -> list[Path]:
    """The spares a process left beside ``target`` (it was killed, or the power cut)."""
    prefix = target.name + ".next-"
    try:
        names = os.listdir(target.parent)
    except OSError:
        return []
    return [target.parent / name for name in names if name.startswith(prefix)]


def remove_leftovers(target: Path) -> None:
    """Remove what a killed process left of its spares beside ``target``: never its
    state — a spare was never published (a published one has the target's name)."""
    for path in spare_names(target):
        with contextlib.suppress(OSError):
            os.unlink(path)


def capacity_for(size: int) -> int:
    """The blocks a spare gets for a save of ``size`` bytes: room to grow to twice it."""
    return max(_BLOCK, -(-2 * size // _BLOCK) * _BLOCK)


class SpareFiles:
    """Spare files beside ``target``: ``ready`` one with the data, then ``publish`` it.

    Used by one thread at a time (the run's ``StateFile`` holds its lock)."""

    def __init__(self, target: Path) -> None:
        self.target = target
        self._spare: tuple[Path, int, int] | None = None  # path, fd, capacity
        self._readied: tuple[Path, int] | None = None
        self._retired: list[int] = []  # replaced files, closed at the next ``ready``
        self._held = -1  # the published file, open so its freeing waits
        self._serial = 0
        self._fallocate: _Fallocate | bool | None = False  # False: not looked up yet

    def ready(self, data: bytes) -> None:
        """Write ``data`` into a spare (made now when none fits), free what earlier
        publishes replaced, make the next spare. ``OSError``: nothing is readied."""
        self.cancel()
        spare, self._spare = self._spare, None
        if spare is not None and spare[2] < len(data):
            self._retire_spare(spare[0], spare[1])  # too small for this state
            spare = None
        if spare is None:
            spare = self._new_spare(capacity_for(len(data)))
        path, fd, _capacity = spare
        try:
            _write_all(fd, data)
        except BaseException:
            self._discard(path, fd)
            raise
        self._readied = (path, fd)
        retired, self._retired = self._retired, []
        for old in retired:
            with contextlib.suppress(OSError):
                os.close(old)
        with contextlib.suppress(OSError):  # a full disk: the next save makes its own
            self._spare = self._new_spare(capacity_for(len(data)))

    @property
    def readied(self) -> bool:
        return self._readied is not None

    def publish(self) -> None:
        """Rename the readied spare over the target (not synced). ``OSError``: the
        target is as it was, the spare discarded."""
        readied, self._readied = self._readied, None
        if readied is None:
            return
        path, fd = readied
        try:
            os.rename(path, self.target)
        except BaseException:
            self._discard(path, fd)
            raise
        self.replaced()
        self._held = fd

    def cancel(self) -> None:
        """Drop the readied spare unpublished (the save it held was not kept)."""
        readied, self._readied = self._readied, None
        if readied is not None:
            self._discard(*readied)

    def replaced(self) -> None:
        """The target was replaced (by a publish, or a durable write): the file held
        is no longer the target's, so it is freed at the next ``ready``."""
        if self._held >= 0:
            self._retired.append(self._held)
            self._held = -1

    def close(self) -> None:
        """Remove the spares, close every file held."""
        self.cancel()
        if self._spare is not None:
            self._discard(*self._spare[:2])
            self._spare = None
        for fd in [*self._retired, self._held]:
            if fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self._retired, self._held = [], -1

    def _retire_spare(self, path: Path, fd: int) -> None:
        with contextlib.suppress(OSError):
            os.unlink(path)
        self._retired.append(fd)

    @staticmethod
    def _discard(path: Path, fd: int) -> None:
        with contextlib.suppress(OSError):
            os.unlink(path)
        with contextlib.suppress(OSError):
            os.close(fd)

    def _new_spare(self, capacity: int) -> tuple[Path, int, int]:
        if self._fallocate is False:
            self._fallocate = _keep_size_fallocate()
        self._serial += 1
        path = self.target.with_name(f"{self.target.name}.next-{self._serial}")
        try:
            fd = open_fd(path, _CREATE)
        except FileExistsError:  # left by a killed process, or planted: the name is ours
            os.unlink(path)
            fd = open_fd(path, _CREATE)
        try:
            if isinstance(self._fallocate, _Fallocate):
                self._fallocate(fd, capacity)
        except OSError as exc:
            if exc.errno not in (errno.EOPNOTSUPP, errno.ENOSYS):
                self._discard(path, fd)
                raise
        return path, fd, capacity


class Beside:
    """One call at a time on a thread of its own, while the caller does something else
    (``start(call, arg)``, then ``wait()``, which raises what the call raised). The
    run's key set flushes its log on its own thread — where the power-cut harness
    stops it — and readies the next ``state.json`` beside it."""

    def __init__(self) -> None:
        self._go = threading.Lock()
        self._go.acquire()
        self._done = threading.Lock()
        self._done.acquire()
        self._call: Callable[[bytes], None] | None = None
        self._arg = b""
        self._error: BaseException | None = None
        self._thread: threading.Thread | None = None

    def start(self, call: Callable[[bytes], None], arg: bytes) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._loop, name="beside", daemon=True)
            self._thread.start()
        self._call, self._arg = call, arg
        self._go.release()

    def wait(self) -> None:
        """Until the call is done. A signal handler that raises (Ctrl-C in the flow)
        still waits it out first: a wait left behind would let the next one return
        before its own call was done."""
        interrupted: BaseException | None = None
        while True:
            try:
                self._done.acquire()
                break
            except BaseException as exc:  # raised by a signal handler, in the acquire
                interrupted = exc
        error, self._error = self._error, None
        if interrupted is not None:
            raise interrupted
        if error is not None:
            raise error

    def close(self) -> None:
        if self._thread is not None:
            self._call = None
            self._go.release()
            self._thread.join()
        self._thread = None

    def _loop(self) -> None:
        while True:
            self._go.acquire()
            call, arg = self._call, self._arg
            if call is None:
                return
            try:
                call(arg)
            except BaseException as exc:  # handed to the waiter
                self._error = exc
            self._done.release()


class _Fallocate:
    """``fallocate(fd, FALLOC_FL_KEEP_SIZE, 0, n)``: blocks given, the size kept at 0
    (``os.posix_fallocate`` would set the size, which a publish would then cut back)."""

    def __init__(self) -> None:
        import ctypes  # the run's process only, at its first save

        libc = ctypes.CDLL(None, use_errno=True)
        self._call = libc.fallocate
        self._call.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64]
        self._call.restype = ctypes.c_int
        self._errno = ctypes.get_errno

    def __call__(self, fd: int, size: int) -> None:
        if self._call(fd, _FALLOC_KEEP_SIZE, 0, size) != 0:
            code = self._errno()
            raise OSError(code, os.strerror(code))


def _keep_size_fallocate() -> _Fallocate | None:
    try:
        return _Fallocate()
    except (OSError, AttributeError):  # no such call here (not Linux): spares without blocks
        return None


def _write_all(fd: int, data: bytes) -> None:
    view, at = memoryview(data), 0
    while at < len(data):
        at += os.pwrite(fd, view[at:], at)
