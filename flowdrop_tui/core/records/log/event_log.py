"""``cycle.jsonl``'s append side: one line per event, written whole or not at all.

Each event is one JSON object on one line, written with a single ``write`` on a
descriptor opened ``O_APPEND``: a kill leaves at most one torn last line, and
readers skip any line that does not parse (``event_lines``). Event names and
fields are documented in ``docs/records.md``. A field too big for a line goes to a
side file in the run's ``events/`` folder (``side_value`` reads it back).
"""

from __future__ import annotations

import contextlib
import errno
import os
import pwd
import re
import secrets
import socket
import threading
from pathlib import Path
from typing import Any

import orjson

from flowdrop_tui.core.files.atomic import datasync, open_fd
from flowdrop_tui.core.paths import refuse_link
from flowdrop_tui.core.records import mirror
from flowdrop_tui.core.times import now_iso

RECORD_VERSION = 1


def who() -> dict[str, Any]:
    """Who is asking: recorded with every stop and pause request."""
    try:
        user = os.getlogin()
    except OSError:
        try:
            user = pwd.getpwuid(os.getuid()).pw_name  # no controlling terminal (detached)
        except KeyError:
            user = os.environ.get("USER") or str(os.getuid())
    return {"pid": os.getpid(), "user": user, "host": socket.gethostname()}


class EventLog:
    """The append side of a run's ``cycle.jsonl``, held by the process that holds the run.

    Only that process writes: a flow that forks (no exec) leaves a child holding
    this same object, and the child's appends (its own end, a signal it gets) are
    dropped, so a run never gets a second ``ended`` from a copy of itself.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        # O_NOFOLLOW: a record is appended to as the file it is, never through a link
        # left in its place (a resumed or closed run's folder already exists).
        flags = os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW
        self._fd = open_fd(path, flags)  # never fd 0-2: a flow may close its stdout
        self._owner = os.getpid()
        # Re-entrant: a signal handler in the run appends from the main thread,
        # possibly while that thread is inside append() itself.
        self._lock = threading.RLock()
        # A record appended to again (resume, closing a paused run) may end in a torn
        # line, left by a kill or a full disk mid-write. The next event starts on a
        # line of its own, so the torn piece stays one skipped line and swallows nothing.
        self._torn = _ends_mid_line(self._fd)
        self._unsynced = False  # appended since the last flush (``sync``)
        self._writing = False  # a line being written (``_write``: a handler's waits for it)
        self._queued: list[bytes] = []

    def append(self, event: str, **fields: Any) -> dict[str, Any]:
        """Append one event; returns it. Never raises for an unwritable value or a full disk.

        A line is kept under ``EVENT_MAX``: a bigger field (a result, an error, the
        metadata a snapshot carried, a logged value) goes to a file of its own in the
        run's ``events/`` folder, and the event holds a reference (``side_value``
        reads it back). A reader following the record then never meets a huge line."""
        record, line = self._prepared(event, fields)
        with contextlib.suppress(OSError):  # full disk or gone: the run carries on (SPEC §5.3)
            self._write(line)
        return record

    def record(self, event: str, **fields: Any) -> dict[str, Any]:
        """Append one event that must not happen unrecorded (a round's start); raises
        ``OSError`` when it is not wholly in the file (a full disk). Not synced."""
        record, line = self._prepared(event, fields)
        self._write(line)
        return record

    def commit(self, event: str, **fields: Any) -> dict[str, Any]:
        """Append one event and make it durable before returning (``created``, ``paused``,
        ``ended``: what is reported must survive a power cut). Raises ``OSError`` when
        the event is not wholly on disk."""
        record, line = self._prepared(event, fields)
        with self._lock:
            if self._write(line):
                datasync(self._fd)
                self._unsynced = False
        return record

    def sync(self) -> None:
        """Make every event appended so far durable: the run calls it before each state
        save is flushed (``StateFile.keeper.before_durable``) and after each round, so
        what a later command decides on — round numbers, the budget used, the streaks, a
        ``resumed`` — is never behind the saved state after a power cut."""
        remote = mirror.current()
        if remote is not None and remote.keeps_durably:
            return  # remote mode: PostgreSQL's commit is the durable copy
        with self._lock:
            if self._unsynced and self._fd >= 0 and os.getpid() == self._owner:
                datasync(self._fd)
                self._unsynced = False

    def _prepared(self, event: str, fields: dict[str, Any]) -> tuple[dict[str, Any], bytes]:
        record, line = _line(event, fields)
        if len(line) > EVENT_MAX:
            record, line = self._bounded(record)
        return record, line

    def _write(self, line: bytes) -> bool:
        """Write one line whole; whether it was written (not by a forked copy of the run).

        Re-entered by a signal handler on this thread while a write is under way, the
        handler's line is queued and written by that write, right after its own line:
        between a line's ``write`` and the ``lseek`` that says where it landed, another
        line would move the offset the mirror is told (a gap in the mirror's copy, which
        its readers stop at). Handlers only ``append``."""
        if os.getpid() != self._owner:
            return False
        remote = mirror.current()
        # whole(): a stop now's KeyboardInterrupt waits for the line and what a handler
        # queued (in remote mode: and for the mirror's copy of them)
        with self._lock, mirror.whole():
            if self._writing:
                self._queued.append(line)
                return True
            try:
                self._writing = True  # (inside: a KeyboardInterrupt never leaves it set)
                self._write_one(line, remote)
                while self._queued:
                    self._write_one(self._queued.pop(0), remote)
            finally:
                self._writing = False
                self._queued.clear()  # (the disk is full: what is left is lost as well)
        return True

    def _write_one(self, line: bytes, remote: mirror.Mirror | None) -> None:
        data = b"\n" + line if self._torn else line
        written = os.write(self._fd, data)  # one write per line: O_APPEND keeps it whole
        self._unsynced = True
        self._torn = written < len(data)  # short only when the disk is full
        if remote is not None:  # what reached the disk, where it landed
            end = os.lseek(self._fd, 0, os.SEEK_CUR)
            remote.appended(self.path, data[:written], end - written)
        if self._torn:
            raise OSError(errno.ENOSPC, f"{self.path}: only {written} of {len(data)} bytes written")

    def _bounded(self, record: dict[str, Any]) -> tuple[dict[str, Any], bytes]:
        """``record`` with its biggest fields moved to side files until its line fits."""
        sizes = []
        for name, value in record.items():
            if name in ("t", "event"):
                continue
            raw = orjson.dumps(value, default=str, option=orjson.OPT_NON_STR_KEYS)
            sizes.append((len(raw), name, raw))
        record = dict(record)
        line = b""
        for size, name, raw in sorted(sizes, reverse=True):
            record[name] = self._side_file(str(record["event"]), name, raw)
            line = orjson.dumps(record, default=str, option=orjson.OPT_NON_STR_KEYS) + b"\n"
            if len(line) <= EVENT_MAX or size <= 1024:
                break
        return record, line

    def _side_file(self, event: str, name: str, raw: bytes) -> dict[str, Any]:
        """Write one field's JSON to ``events/`` in the run folder; the reference to it."""
        label = "".join(c if c.isalnum() or c == "_" else "-" for c in f"{event}-{name}")[:60]
        relative = f"{SIDE_DIR}/{label}-{secrets.token_hex(6)}.json"
        preview = raw[:200].decode(errors="replace")
        try:
            folder = self.path.parent / SIDE_DIR
            with contextlib.suppress(FileExistsError):
                folder.mkdir()
            refuse_link(folder)  # never through a link left in the record
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
            if os.getpid() != self._owner:
                raise OSError(errno.EPERM, "a forked copy of the run writes no record")
            fd = open_fd(self.path.parent / relative, flags)
            try:
                view = memoryview(raw)
                while view:
                    view = view[os.write(fd, view) :]
                datasync(fd)  # on disk before the event that names it
            finally:
                os.close(fd)
            remote = mirror.current()
            if remote is not None:
                remote.wrote(self.path.parent / relative, raw)
        except OSError:
            # Not writable (full disk, a link): the event keeps the beginning only.
            return {SIDE_KEY: None, "bytes": len(raw), "preview": preview, "lost": True}
        return {SIDE_KEY: relative, "bytes": len(raw), "preview": preview}

    def fileno(self) -> int:
        return self._fd

    def close(self) -> None:
        with self._lock:
            if self._fd >= 0:
                os.close(self._fd)
                self._fd = -1


EVENT_MAX = 64 * 1024  # an event line longer than this moves its big fields to side files
SIDE_DIR = "events"  # in the run folder
SIDE_KEY = "flowdrop_side_file"
_SIDE_RE = re.compile(r"^events/[A-Za-z0-9_-]{1,60}-[0-9a-f]{12}\.json$")
_SIDE_MAX = 256 << 20


def side_value(run_dir: Path, value: Any) -> Any:
    """A field as it was appended: read back from its side file when the event holds a
    reference (``EventLog.append``); anything else as it is. A reference that cannot be
    read (the file gone, or not one the engine wrote) is returned as it is."""
    if not (isinstance(value, dict) and isinstance(value.get(SIDE_KEY), str)):
        return value
    relative = value[SIDE_KEY]
    if not _SIDE_RE.match(relative):
        return value  # read from a file: only a name the engine makes, never a path
    try:
        fd = os.open(run_dir / relative, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            raw = os.read(fd, _SIDE_MAX)
        finally:
            os.close(fd)
        return orjson.loads(raw)
    except (OSError, orjson.JSONDecodeError):
        return value


def _line(event: str, fields: dict[str, Any]) -> tuple[dict[str, Any], bytes]:
    record = {"t": now_iso(), "event": event, **fields}
    try:
        line = orjson.dumps(record, default=str, option=orjson.OPT_NON_STR_KEYS) + b"\n"
    except (orjson.JSONEncodeError, TypeError):
        record = {"t": record["t"], "event": event, "fields": repr(fields)[:2000]}
        line = orjson.dumps(record) + b"\n"
    return record, line


def _ends_mid_line(fd: int) -> bool:
    size = os.fstat(fd).st_size
    return size > 0 and os.pread(fd, 1, size - 1) != b"\n"
