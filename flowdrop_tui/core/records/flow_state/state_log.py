"""A run's state log (``state.log``): a key set made durable at one flush (SPEC §5.1).

``state.json`` replaced durably at every key set cost two journal commits (the new
file's bytes, then the folder holding the rename): three times SQLite's commit. This
log costs one flush, as SQLite's WAL does, for the same reason: it is written into
blocks that already exist, so ``fdatasync`` has no size or block map to commit, only
the bytes. Each save writes one record after the last and syncs once; ``state.json``
is then published from it the plain way — a new file renamed over, not synced (the
seed: setting a key writes the file again) — and made durable when the run's process
lets go of it (its end, its pause), the log then removed.

The file is 64 KiB to 1 MiB of written zeros, made durable (its bytes, then its
name) before its first record. A record is a header — magic, ``seq`` (strictly
increasing over the log's life: a resumed run's process goes on from its newest),
kind, payload length, a CRC-32 of all of it seeded with the run's id — and its
payload: the whole encoded state, byte for byte what ``state.json`` gets.

A record that would not fit before the end wraps to offset 0, after ``state.json``
was made durable — or, when ``state.json`` cannot be replaced (a bind mount over it, an
I/O error on its rename), goes at offset 0 of a new log renamed over this one: the log
keeps every save either way. A state bigger than a quarter of the log is written to
``state.json`` durably, and the log removed. Reading: records are taken in order
from offset 0 up to the first that is not whole (a torn write, the zeros, the
previous lap's bytes out of step); the one with the highest ``seq`` wins: its
payload is the state; with none, ``state.json`` is. The previous lap's records have
lower numbers, a torn one fails its CRC, another run's fails the seed: what a power
cut leaves is never older than the last save that returned
(docs/decisions.md, "Durability").

A run no process holds that left its log (a kill, a power cut) is settled by the first
reader that looks (``settle``: ``read_run_states``, a run found interrupted):
``state.json`` made the log's newest, durably, and the log removed — unless a person
edited ``state.json`` since (valid JSON, newer than the log, equal to none of its
records: the file wins, said, and the log is removed) or left text that is not JSON
there (refused as INT-15 by the read, both files left as they are).
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import struct
import sys
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import orjson

from flowdrop_tui.core.files import locks
from flowdrop_tui.core.files.atomic import (
    datasync,
    full_sync,
    open_fd,
    remove_file,
    sync_dir,
    write_atomic,
)
from flowdrop_tui.core.files.regular import open_regular, read_regular
from flowdrop_tui.core.paths import LIVE_LOCK, STATE, STATE_LOG

# The log's size: 16 saves of the first state saved, 64 KiB to 1 MiB. A state bigger
# than a quarter of it is written to state.json durably, as before the log (its saves
# cost what they did), and the log is removed for the rest of the process.
LOG_MIN, LOG_MAX = 64 << 10, 1 << 20
MAGIC = b"FDsl"
_HEADER = struct.Struct("<4sQB3xII")  # magic, seq, kind, length, crc
_CRC_AT = _HEADER.size - 4
FULL = 1  # the one kind of record: a whole state
_ZEROS = bytes(LOG_MIN)
NEW_LOG = STATE_LOG + ".new"  # a new lap's log, while it is made (``StateLog.renew``)
SET_ASIDE = STATE_LOG + ".before-edit"  # a log whose state.json a person edited since


def _seed(log: Path) -> int:
    return zlib.crc32(log.parent.name.encode())


def _record(seed: int, seq: int, kind: int, payload: bytes) -> bytes:
    head = _HEADER.pack(MAGIC, seq, kind, len(payload), 0)[:_CRC_AT]
    crc = zlib.crc32(payload, zlib.crc32(head, seed))
    return head + struct.pack("<I", crc) + payload


@dataclass
class Newest:
    """The log's newest whole record: its number, kind, payload, where the next goes."""

    seq: int
    kind: int
    payload: bytes
    end: int


def records(raw: bytes, seed: int) -> list[Newest]:
    """The valid records read in order from offset 0, up to the first that is not whole."""
    found: list[Newest] = []
    at = 0
    size = _HEADER.size
    while at + size <= len(raw):
        magic, seq, kind, length, crc = _HEADER.unpack_from(raw, at)
        end = at + size + length
        if magic != MAGIC or kind != FULL or end > len(raw):
            break
        payload = raw[at + size : end]
        if zlib.crc32(payload, zlib.crc32(raw[at : at + _CRC_AT], seed)) != crc:
            break
        found.append(Newest(seq, kind, payload, end))
        at = end
    return found


def scan(raw: bytes, seed: int) -> Newest | None:
    """The valid record with the highest ``seq`` among those read in order from 0."""
    return max(records(raw, seed), key=lambda record: record.seq, default=None)


def _read_log(run_dir: Path) -> list[Newest]:
    log = run_dir / STATE_LOG
    try:
        raw = read_regular(log, LOG_MAX)
    except OSError:
        return []
    return records(raw, _seed(log))


def newest(run_dir: Path) -> Newest | None:
    """The newest record of the run's log; ``None`` when there is no log (the usual case
    for a run that is not live) or it holds no whole record. A log that is not a regular
    file (a FIFO, a link to a device) is never read: it holds nothing."""
    return max(_read_log(run_dir), key=lambda record: record.seq, default=None)


def state_bytes(run_dir: Path) -> bytes | None:
    """The state the log says is the run's, as ``state.json`` bytes; ``None``: the file's."""
    found = newest(run_dir)
    return found.payload if found is not None and found.kind == FULL else None


def _say(message: str) -> None:
    """A warning on stderr, as the CLI words one (a read has no record to write it in:
    a dead run's record is never written again)."""
    with contextlib.suppress(OSError, ValueError, AttributeError):
        sys.stderr.write(f"warning: {message}\n")


class Settled:
    """What ``settle`` found (the words are the module's)."""

    NO_LOG = "no log"  # nothing to settle: state.json is the state
    HELD = "held"  # a process holds the run (or it could not be settled): the log is read
    SETTLED = "settled"  # state.json made the log's newest, the log removed
    EDITED = "edited"  # state.json edited by hand: it wins, the log removed
    REFUSED = "refused"  # state.json is text but not JSON: both left as they are


def settle(run_dir: Path) -> str:
    """A run no process holds whose log outlived it (a kill, a power cut): make
    ``state.json`` what the log says, durably, and remove the log — under the run's own
    lock, so a resume never loses its log under it. A ``state.json`` a person edited
    since is honoured (``EDITED``) or, text that is not JSON, refused (``REFUSED``: the
    read that follows says so, naming it). One of ``Settled``'s words."""
    log = run_dir / STATE_LOG
    try:
        if not stat.S_ISREG(os.lstat(log).st_mode):
            return Settled.NO_LOG
    except OSError:
        return Settled.NO_LOG
    try:
        locks.acquire(run_dir / LIVE_LOCK)
    except (locks.LockHeld, OSError):
        return Settled.HELD  # live, or being resumed: its process keeps the log
    try:
        return _settle_locked(run_dir)
    except OSError:
        return Settled.HELD  # state.json cannot be written (a bind mount, EIO): log read
    finally:
        locks.release(run_dir / LIVE_LOCK)


def _settle_locked(run_dir: Path) -> str:
    with contextlib.suppress(OSError):  # a new lap's log a kill left half-made: its save
        remove_file(run_dir / NEW_LOG)  # had not returned, the log before holds the last
    logged = _read_log(run_dir)
    if not logged:  # a log with no whole record (made, then cut): state.json stands
        remove(run_dir)
        return Settled.SETTLED
    newest_record = max(logged, key=lambda record: record.seq)
    state = run_dir / STATE
    raw, newer = _file_as_it_stands(state, run_dir / STATE_LOG)
    if raw is not None and newer and not _left_by_a_crash(raw):
        if any(record.payload == raw for record in logged):
            pass  # ours: a save the log holds (the newest, or one the log went past)
        elif _is_json(raw):
            aside = run_dir / SET_ASIDE  # retired, never read again: the edit is the state
            os.replace(run_dir / STATE_LOG, aside)
            sync_dir(run_dir)
            _say(
                f"{state} was edited after its run {run_dir.name} stopped: the edit is the "
                f"run's state from now on (the saves its log held are set aside in {aside})"
            )
            return Settled.EDITED
        else:
            return Settled.REFUSED
    if raw != newest_record.payload:
        write_atomic(state, newest_record.payload)
    remove(run_dir)
    return Settled.SETTLED


def _file_as_it_stands(state: Path, log: Path) -> tuple[bytes | None, bool]:
    """``state.json``'s bytes (``None``: missing, or not a regular file) and whether it
    was changed after the log was last written: a file no newer than its log is one the
    run published, whatever a power cut left of it."""
    try:
        fd = open_regular(state)
    except OSError:
        return None, False
    try:
        changed = os.fstat(fd).st_mtime_ns
        chunks = []
        while data := os.read(fd, 1 << 20):
            chunks.append(data)
    except OSError:
        return None, False
    finally:
        os.close(fd)
    try:
        newer = changed > os.stat(log).st_mtime_ns
    except OSError:
        newer = True
    return b"".join(chunks), newer


def _left_by_a_crash(raw: bytes) -> bool:
    """What a power cut leaves of a file, never a person's edit: nothing, zeros (blocks
    never written), or bytes that are not text at all."""
    if not raw.strip() or b"\0" in raw:
        return True
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        return True
    return False


def _is_json(raw: bytes) -> bool:
    try:
        orjson.loads(raw)
    except orjson.JSONDecodeError:
        return False
    return True


def remove(run_dir: Path) -> None:
    """Remove the run's log (``state.json`` is durable and current), the name durably:
    a log that came back naming blocks since given to another file could mislead. Its
    blocks are given back with it (``remove_file``): its inode coming back still
    listing them had ``e2fsck`` write zeros into the folder that took them."""
    remove_file(run_dir / STATE_LOG)


class LogFull(Exception):
    """The record does not fit before the end: ``state.json`` must be made durable and
    the log wrapped (``StateLog.wrap``)."""


class TooBig(Exception):
    """A state bigger than a quarter of the log: kept in ``state.json`` alone."""


def size_for(first: int) -> int:
    """The log's size for a run whose first save is ``first`` bytes."""
    wanted = 16 * (first + _HEADER.size)
    return min(LOG_MAX, max(LOG_MIN, -(-wanted // LOG_MIN) * LOG_MIN))


class StateLog:
    """The writing side, held by the process that holds the run (``StateFile``)."""

    def __init__(self, run_dir: Path) -> None:
        self.path = run_dir / STATE_LOG
        self._seed = _seed(self.path)
        self._fd = -1
        self._seq = 0
        self._offset = 0
        self.size = 0

    @property
    def opened(self) -> bool:
        return self._fd >= 0

    def _open(self, first: int) -> None:
        flags = os.O_RDWR | os.O_NOFOLLOW
        try:
            fd = open_fd(self.path, flags | os.O_CREAT)  # new, or a resumed run's log
        except OSError as exc:
            if exc.errno not in (errno.ELOOP, errno.ENXIO, errno.EISDIR):
                raise
            # A link or something else planted where the log goes: never written through
            # (the name is the run's own); a folder is refused with the error.
            os.unlink(self.path)
            fd = open_fd(self.path, flags | os.O_CREAT)
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                raise OSError(errno.EINVAL, "not a regular file", str(self.path))
            found = None
            size = info.st_size
            if LOG_MIN <= size <= LOG_MAX and size % LOG_MIN == 0:
                found = scan(os.pread(fd, size, 0), self._seed)
            if found is None:  # new (or not one of ours): zeros, on disk before its name
                size = size_for(first)
                try:
                    _zero(fd, size)
                    sync_dir(self.path.parent)
                except OSError:  # a full disk: it holds nothing yet, so it goes at once
                    with contextlib.suppress(OSError):
                        os.unlink(self.path)
                    raise
            else:  # a resumed run's log: numbers go on from its newest record
                self._seq, self._offset = found.seq, found.end
        except BaseException:
            os.close(fd)
            raise
        self._fd, self.size = fd, size

    def append(self, kind: int, payload: bytes, *, sync: bool = True) -> None:
        """Write the next record after the last and flush it (``sync``). ``LogFull`` when
        it does not fit before the end, ``TooBig`` when it never will (nothing written)."""
        if self._fd < 0:
            self._open(len(payload))
        record = _record(self._seed, self._seq + 1, kind, payload)
        if len(record) > self.size // 4:
            raise TooBig
        if self._offset + len(record) > self.size:
            raise LogFull
        _write_all(self._fd, record, self._offset)
        if sync:
            datasync(self._fd)
        self._seq += 1
        self._offset += len(record)

    def wrap(self) -> None:
        """The next record goes at offset 0 (``state.json`` was just made durable)."""
        self._offset = 0

    def renew(self, kind: int, payload: bytes) -> None:
        """A new lap in a new log: ``payload`` the first record of a log made beside this
        one, durable, then renamed over it — for when ``state.json`` cannot be made
        durable before the lap writes over the log's start. The old log's blocks are
        given back once its name is gone (as ``remove_file``: ext2)."""
        record = _record(self._seed, self._seq + 1, kind, payload)
        fresh = self.path.with_name(NEW_LOG)
        fd = open_fd(fresh, os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW)
        try:
            _zero(fd, self.size, record)
            os.rename(fresh, self.path)
            sync_dir(self.path.parent)
        except BaseException:
            os.close(fd)
            with contextlib.suppress(OSError):
                os.unlink(fresh)
            raise
        old, self._fd = self._fd, fd
        self._seq += 1
        self._offset = len(record)
        with contextlib.suppress(OSError):
            os.ftruncate(old, 0)
            full_sync(old)
        os.close(old)

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


def _zero(fd: int, size: int, first: bytes = b"") -> None:
    """Make ``fd`` ``size`` bytes of zeros (``first`` at its start), durably."""
    os.ftruncate(fd, 0)
    for at in range(0, size, len(_ZEROS)):
        _write_all(fd, _ZEROS, at)
    if first:
        _write_all(fd, first, 0)
    full_sync(fd)


def _write_all(fd: int, data: bytes, offset: int) -> None:
    written = os.pwrite(fd, data, offset)  # whole at once, almost always
    if written < len(data):
        view = memoryview(data)
        while written < len(view):
            written += os.pwrite(fd, view[written:], offset + written)


class Keeper:
    """How a ``StateFile`` keeps each save: durable in the log at one flush (the run's
    events appended before it flushed first: ``before_durable``), then ``state.json``
    published the plain way — a new file renamed over, not synced — before the key set
    returns (the seed: "setting a key writes the file again"). A state too big for the
    log, or a log that fails, is written to ``state.json`` durably as before the log
    existed. A ``state.json`` that cannot be replaced never stops the log: each lap then
    starts a new log (``StateLog.renew``), and every reader reads the log first.

    Called by one thread at a time: ``StateFile`` holds its lock around each call."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.run_dir = path.parent
        self.before_durable: Callable[[], None] | None = None
        self._log: StateLog | None = StateLog(self.run_dir)
        self._log_dropped = False  # the log failed: removed once state.json is durable
        self._kept: bytes | None = None  # the last save made durable (log or file)
        self._pending: bytes | None = None  # kept, not yet in state.json: tried again
        # Why the last publish of state.json failed (``None``: it did not); the save
        # itself is in the log. StateFile says so once, and again when it recovers.
        self.publish_trouble: str | None = None

    def keep(self, data: bytes, *, mirrored: bool = False) -> None:
        """Make ``data`` the run's state, surviving a power cut. ``mirrored``: a mirror's
        commit is the durable copy, so this is its working copy — the log's record not
        flushed, and ``state.json`` replaced not now but at the log's next wrap and at
        ``close`` (every reader reads the log first). ``OSError``: it could not be kept."""
        durable = not mirrored
        if durable and self.before_durable is not None:
            with contextlib.suppress(OSError):  # events are kept as well as they can be
                self.before_durable()
        if data == self._kept:
            if self._pending is not None:  # state.json failed to follow: once more
                self._publish(self._pending)
            return
        log = self._log
        if log is not None:
            try:
                try:
                    log.append(FULL, data, sync=durable)
                except LogFull:  # the lap is over: its newest record, durable elsewhere
                    self._lap(log, data, durable)
            except (OSError, TooBig):
                self._drop_log()  # state.json alone from now on, the log removed below
            else:
                self._kept = data
                if durable:
                    self._publish(data)
                return
        self._write_durably(data)  # raises: this save failed, the last one stands
        self._kept = data

    def _lap(self, log: StateLog, data: bytes, durable: bool) -> None:
        """Start the log's next lap with ``data``: ``state.json`` made durable and the
        log wrapped, or — ``state.json`` cannot be replaced — a new log holding it."""
        try:
            self._write_durably(data)
        except OSError as exc:
            self.publish_trouble = f"{type(exc).__name__}: {exc}"
            self._pending = data
            log.renew(FULL, data)
            return
        log.wrap()
        log.append(FULL, data, sync=durable)

    def close(self) -> str | None:
        """The run's process lets go: ``state.json`` made durable, the log removed. What
        went wrong, in words (the log then stays, and the next reader settles it)."""
        try:
            if self._kept is not None:
                self._write_durably(self._kept)
                if self._log is not None:
                    self._log.close()
                    self._log = None
                remove(self.run_dir)
        except OSError as exc:
            return (
                f"state.json could not be made durable at the run's end ({exc.strerror or exc}); "
                f"the state stays in {STATE_LOG}, which every reader reads"
            )
        finally:
            if self._log is not None:
                self._log.close()
        return None

    def _write_durably(self, data: bytes) -> None:
        write_atomic(self.path, data)
        self._pending = None
        if self._log_dropped:
            with contextlib.suppress(OSError):
                remove(self.run_dir)
                self._log_dropped = False

    def _drop_log(self) -> None:
        """The log failed (an I/O error) or a state outgrew it: saves go to ``state.json``
        durably from now on, and the log is removed once the file holds the newest."""
        if self._log is not None:
            self._log.close()
        self._log = None
        self._log_dropped = True

    def _publish(self, data: bytes) -> None:
        """``state.json`` replaced by ``data``, not synced (the log holds it durably); a
        failure is kept in ``publish_trouble``, and tried again at the next save, the end."""
        try:
            write_atomic(self.path, data, durable=False)
        except OSError as exc:
            self.publish_trouble = f"{type(exc).__name__}: {exc}"
            self._pending = data
            return
        self.publish_trouble = None
        self._pending = None
