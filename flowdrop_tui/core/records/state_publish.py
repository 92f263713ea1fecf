"""How ``state.json`` follows each key set: its spare rewritten, then swapped in.

The seed has ``state.json`` written again at every key set, and SPEC §5.1 before the
call returns. ``state.log`` already holds the save durably (``state_log``), so this
write needs no flush; what it needs is that a reader of the file sees one whole
state, never a file changing under it. A new file per key set (an inode made, given
its blocks, renamed over the old one, which is freed) did that at 1.5–2.2× SQLite's
whole commit (bench/README.md (a)). So the run's process keeps a spare of
``state.json`` — the ``state.json`` before — at ``.flowdrop/spares/<run-id>``
(``paths.state_spare``): a save is written into the spare, which is then swapped with
``state.json`` by one ``renameat2(RENAME_EXCHANGE)``. No inode is made or freed:
about 20 µs in all.

A reader never sees the spare change under it. The spare is rewritten only under a
write lease (``F_SETLEASE``), which the kernel grants only while no other process has
the file open — a reader still reading the ``state.json`` before has it open, and
this save is then published as before, by a new file renamed over — and which holds
any open of the file meanwhile until the lease is let go, right after the write,
before the swap. ``state.json``'s own file is never written and never leased: only
names move. What can wait on a lease is an open of the spare itself (it lives
outside the run's folder, so a reader of the folder never opens it) or of a
``state.json`` looked up before the last swap; a writer stopped (Ctrl-Z) in those
microseconds makes that one open wait for the kernel's lease-break time. A lease's
break is said with a signal: SIGURG here, ignored unless a handler is set (a flow that
sets one gets new files).

``state.json`` is swapped only while it is the file this process put there (a folder
or another file planted in its place is left where it is, and the save published the
old way, which says why it could not be). Where the exchange or leases are not to be
had (another filesystem, leases turned off, a file not ours), every save is a new
file renamed over, as before.

Called by one thread at a time: ``StateFile`` holds its lock around each call.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import signal
import stat
import sys
from pathlib import Path

from flowdrop_tui.core.files.atomic import datasync, open_fd, sync_dir, write_atomic
from flowdrop_tui.core.paths import state_spare

_RENAME_EXCHANGE = 2
_AT_SYMLINK_NOFOLLOW = 0x100
_AT_STATX_DONT_SYNC = 0x4000
_STATX_TYPE, _STATX_NLINK, _STATX_INO = 0x1, 0x4, 0x100
# A lease refused for these: the file is open elsewhere now (this save goes the old
# way). Any other refusal (EINVAL: no leases here; EACCES: not our file) is for good.
_BUSY = frozenset({errno.EAGAIN, errno.EBUSY})
_NO_EXCHANGE = frozenset({errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, errno.EXDEV})
_SPARE_FLAGS = os.O_RDWR | os.O_NOFOLLOW | os.O_NONBLOCK


class _Libc:
    """What Python's ``os`` lacks: ``renameat2`` (glibc 2.28, musl 1.2.5) and a ``statx``
    asking for a file's type, link count and inode number alone."""

    def __init__(self) -> None:
        import ctypes  # here: only a run's process publishes, never a reader

        libc = ctypes.CDLL(None, use_errno=True)
        rename = libc.renameat2  # AttributeError: none
        int_, text = ctypes.c_int, ctypes.c_char_p
        rename.argtypes = [int_, text, int_, text, ctypes.c_uint]
        rename.restype = int_
        self._rename, self._errno = rename, ctypes.get_errno
        self._statx = getattr(libc, "statx", None)
        if self._statx is not None:
            self._statx.argtypes = [int_, text, int_, ctypes.c_uint, ctypes.c_void_p]
            self._statx.restype = int_
        self._buf = ctypes.create_string_buffer(256)  # struct statx

    def exchange(self, olddir: int, old: str, newdir: int, new: str) -> int:
        """Swap two names; 0, or the errno."""
        done = self._rename(olddir, os.fsencode(old), newdir, os.fsencode(new), _RENAME_EXCHANGE)
        return 0 if done == 0 else self._errno()

    def identity(self, folder: int, name: str) -> tuple[int, int, int]:
        """The inode number, mode and link count of ``name`` (not followed). ``lstat``
        would also ask for the file's ctime, and with multigrain timestamps (Linux 6.13) a
        ctime asked for is then changed at a fine grain, which moves every file's next
        timestamp off the coarse tick: each flush of the log then wrote its own inode too
        (40 µs a key set)."""
        if self._statx is None:
            info = os.stat(name, dir_fd=folder, follow_symlinks=False)
            return info.st_ino, info.st_mode, info.st_nlink
        flags = _AT_SYMLINK_NOFOLLOW | _AT_STATX_DONT_SYNC
        mask = _STATX_TYPE | _STATX_NLINK | _STATX_INO
        if self._statx(folder, os.fsencode(name), flags, mask, self._buf):
            err = self._errno()
            raise OSError(err, os.strerror(err), name)
        raw, order = self._buf.raw, sys.byteorder
        ino, mode = int.from_bytes(raw[32:40], order), int.from_bytes(raw[28:30], order)
        return ino, mode, int.from_bytes(raw[16:20], order)


def _libc() -> _Libc | None:
    if not hasattr(fcntl, "F_SETLEASE"):
        return None
    try:
        return _Libc()
    except (OSError, AttributeError):
        return None


def remove_spare(run_dir: Path) -> None:
    """The spare a killed process left (its run is being settled): its name removed —
    never emptied (a reader may still be reading the ``state.json`` it was), never
    through a link planted at ``spares/``."""
    spare = state_spare(run_dir)
    with contextlib.suppress(OSError):
        if stat.S_ISDIR(os.lstat(spare.parent).st_mode):
            os.unlink(spare)
            sync_dir(spare.parent)  # (a freed inode named after a cut: _forget_name)


class Publisher:
    """``state.json`` replaced by each save: in place, into its spare, when it can be."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.spare_path = state_spare(path.parent)
        self._name, self._spare_name = path.name, self.spare_path.name
        self._libc = _libc()
        self._dir = self._spare_dir = -1
        # Our descriptors of the spare and of state.json's file, kept open from one save
        # to the next (opening and closing one each time made the next flush of the log
        # 40 µs slower on ext4), with what we know of each. -1: none known.
        self._spare, self._spare_ino, self._spare_size = -1, 0, -1
        self._cur, self._cur_ino, self._cur_size = -1, 0, -1

    def prepare(self) -> int:
        """Have the spare ready; its inode number (0: none), which the state log is made
        apart from (``files.placement``). Never raises: without a spare, saves are new
        files."""
        if self._libc is not None and self._spare < 0:
            try:
                self._adopt()
            except OSError:
                self._give_up()
        return self._spare_ino if self._spare >= 0 else 0

    def publish(self, data: bytes, *, durable: bool) -> None:
        """``state.json`` holds ``data`` (``durable``: also after a power cut). ``OSError``:
        it could not be written; ``state.json`` then holds what it held.

        A signal handler's exception (the flow's Ctrl-C) can land between any two steps:
        a lease taken is let go, descriptors whose files' places are no longer known are
        closed and forgotten, and the next save finds the files again by their names.
        (Signals are not held off instead: Python raises a handler's exception right
        after the call that unblocks them as much as after any other, which left every
        signal blocked for good in review.)"""
        if self._libc is not None:
            try:
                done = self._ready() and self._in_place(data, durable)
            except BaseException:
                if self._spare >= 0:
                    with contextlib.suppress(OSError):
                        fcntl.fcntl(self._spare, fcntl.F_SETLEASE, fcntl.F_UNLCK)
                raise
            if done:
                return
        write_atomic(self.path, data, durable=durable)
        self._forget_cur()  # the file it had is state.json no more

    def close(self) -> None:
        """The run's process lets go: the spare is removed, its blocks given back first
        unless a reader has it open (then only its name goes)."""
        self._forget_cur()
        spare, self._spare = self._spare, -1
        try:
            emptied = False
            if spare >= 0 and self._ours(spare) and self._lease_on(spare):
                with contextlib.suppress(OSError):
                    os.ftruncate(spare, 0)  # its blocks back first (ext2: files.atomic)
                    emptied = True
            self._forget_name()
            if emptied:
                with contextlib.suppress(OSError):
                    os.fsync(spare)
        finally:
            self._close(spare)
            for fd in (self._dir, self._spare_dir):
                self._close(fd)
            self._dir = self._spare_dir = -1

    # -- the swap ----------------------------------------------------------------------

    def _ready(self) -> bool:
        """The spare leased, found (or made) at its name, and ``state.json`` the file this
        process put there (or none yet); ``False``: not this time."""
        libc = self._libc
        if libc is None:
            return False
        if signal.getsignal(signal.SIGURG) not in (signal.SIG_DFL, signal.SIG_IGN):
            return False  # the flow handles SIGURG: a lease's break would call it
        try:
            if self._spare < 0:
                self._adopt()
            ino, mode, _ = libc.identity(self._dir, self._name)
        except FileNotFoundError:
            ino = mode = 0  # no state.json: the spare is renamed into its place
        except OSError:
            return False
        if ino and not stat.S_ISREG(mode):
            return False  # something planted there: left alone, and the old way says why
        if self._cur >= 0 and ino != self._cur_ino:
            self._forget_cur()  # replaced by hand: not a file we may swap away unseen
            return False
        try:  # still our spare at its name, with no other name (a hard link someone made)
            spare_ino, _, links = libc.identity(self._spare_dir, self._spare_name)
        except OSError:
            spare_ino = links = 0
        if spare_ino != self._spare_ino or links != 1:
            if spare_ino == self._spare_ino:  # the other name keeps the file; ours goes
                with contextlib.suppress(OSError):
                    os.unlink(self._spare_name, dir_fd=self._spare_dir)
            self._close(self._spare)
            self._spare = -1
            return False
        return self._lease_on(self._spare)

    def _in_place(self, data: bytes, durable: bool) -> bool:
        """Write ``data`` into the leased spare and swap it in; ``False``: it could not
        be done this way (nothing published), so the caller writes a new file."""
        spare, spare_ino, cur, cur_ino = self._spare, self._spare_ino, self._cur, self._cur_ino
        self._spare = self._cur = -1  # known again only once the swap is done (no call
        try:  # between: Python raises a handler's exception only at a call or a loop)
            try:
                view = memoryview(data)
                at = 0
                while at < len(view):
                    at += os.pwrite(spare, view[at:], at)
                if self._spare_size != len(data):
                    os.ftruncate(spare, len(data))
                if durable:
                    datasync(spare)
            finally:
                with contextlib.suppress(OSError):
                    fcntl.fcntl(spare, fcntl.F_SETLEASE, fcntl.F_UNLCK)
            assert self._libc is not None
            failed = self._libc.exchange(self._spare_dir, self._spare_name, self._dir, self._name)
            if failed == errno.ENOENT:  # no state.json: the spare becomes it
                os.rename(
                    self._spare_name, self._name, src_dir_fd=self._spare_dir, dst_dir_fd=self._dir
                )
                self._close(cur)
                cur = -1
            elif failed:
                if failed in _NO_EXCHANGE:
                    self._give_up()
                raise OSError(failed, os.strerror(failed), os.fspath(self.path))
        except OSError:  # nothing published: the caller writes a new file (or says why not)
            self._close(spare)
            self._close(cur)
            return False
        except BaseException:  # a signal's exception mid-way: which file is where is not known
            self._close(spare)
            self._close(cur)
            raise
        # Swapped: the spare is state.json, and the state.json before is the next spare.
        cur_size = self._cur_size
        self._cur, self._cur_ino, self._cur_size = spare, spare_ino, len(data)
        if cur >= 0:
            self._spare, self._spare_ino, self._spare_size = cur, cur_ino, cur_size
        if durable:
            os.fsync(self._dir)
            os.fsync(self._spare_dir)
        if cur < 0:
            with contextlib.suppress(OSError):
                self._adopt()  # (the state.json before, opened: once, or after a new file)
        return True

    def _lease_on(self, fd: int) -> bool:
        """A write lease on ``fd``. Its break signal is set each time: letting a lease go
        sets it back to SIGIO, whose default ends the process."""
        try:
            fcntl.fcntl(fd, fcntl.F_SETSIG, signal.SIGURG)
            fcntl.fcntl(fd, fcntl.F_SETLEASE, fcntl.F_WRLCK)
        except OSError as exc:
            if exc.errno not in _BUSY:
                self._give_up()
            return False
        return True

    def _adopt(self) -> None:
        """Open the file at the spare's name (made when there is none) as the spare. A
        link, FIFO or anything but a plain file of ours there loses its name to a new one."""
        if self._dir < 0:
            self._dir = open_fd(self.path.parent, os.O_RDONLY | os.O_DIRECTORY)
        if self._spare_dir < 0:
            try:
                self.spare_path.parent.mkdir()
                sync_dir(self.spare_path.parent.parent)  # its name durable, as runs/'s
            except FileExistsError:
                pass
            self._spare_dir = open_fd(
                self.spare_path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW
            )
        self._close(self._spare)
        self._spare = -1
        name, folder = self._spare_name, self._spare_dir
        try:
            fd = open_fd(name, _SPARE_FLAGS, dir_fd=folder)
        except FileNotFoundError:
            fd = -1
        except OSError as exc:
            if exc.errno not in (errno.ELOOP, errno.ENXIO, errno.EISDIR, errno.EACCES):
                raise
            os.unlink(name, dir_fd=folder)
            fd = -1
        if fd >= 0:
            info = os.fstat(fd)
            ours = info.st_nlink == 1 and info.st_uid == os.geteuid()
            if not (stat.S_ISREG(info.st_mode) and ours):
                os.close(fd)
                os.unlink(name, dir_fd=folder)
                fd = -1
        if fd < 0:
            try:
                fd = open_fd(name, _SPARE_FLAGS | os.O_CREAT | os.O_EXCL, dir_fd=folder)
            except FileNotFoundError:  # spares/ removed meanwhile: made again next time
                self._close(self._spare_dir)
                self._spare_dir = -1
                raise
            info = os.fstat(fd)
            os.fsync(fd)  # the inode, then its name: no half-made spare after a cut
            os.fsync(folder)
        self._spare, self._spare_ino, self._spare_size = fd, info.st_ino, info.st_size

    def _forget_name(self) -> None:
        """The spare's name removed durably, through the folder we opened (never a link
        planted there). Durably: without a journal, the freed inode can be given to the
        next run's folder, and a name left on disk pointing at it after a power cut had
        ``e2fsck`` clear that folder's second link — and with it the run's record."""
        if self._spare_dir < 0:
            return
        with contextlib.suppress(OSError):
            os.unlink(self._spare_name, dir_fd=self._spare_dir)
            os.fsync(self._spare_dir)

    @staticmethod
    def _ours(fd: int) -> bool:
        try:
            info = os.fstat(fd)
        except OSError:
            return False
        return stat.S_ISREG(info.st_mode) and info.st_nlink == 1

    def _forget_cur(self) -> None:
        self._close(self._cur)
        self._cur = -1

    def _give_up(self) -> None:
        """No exchange or no leases here: every save a new file from now on."""
        self._libc = None
        spare, self._spare = self._spare, -1
        self._close(spare)
        self._forget_name()

    @staticmethod
    def _close(fd: int) -> None:
        if fd >= 0:
            with contextlib.suppress(OSError):
                os.close(fd)
