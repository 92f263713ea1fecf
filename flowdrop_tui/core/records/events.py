"""``cycle.jsonl``: appended one line per write, read tolerantly, folded into a status.

Each event is one JSON object on one line, written with a single ``write`` on a
descriptor opened ``O_APPEND``: a kill leaves at most one torn last line, and
readers skip any line that does not parse. Event names and fields are
documented in ``docs/records.md``.
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
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import Any

import orjson

from flowdrop_tui.core.errors import NotFoundError
from flowdrop_tui.core.files.atomic import datasync as _datasync
from flowdrop_tui.core.files.atomic import open_fd
from flowdrop_tui.core.paths import CYCLE, RUN_ID_RE, Layout, refuse_link
from flowdrop_tui.core.records import mirror
from flowdrop_tui.core.records.budget import (
    ChainBudget,
    Limits,
    Used,
    between,
    clean_limits,
    session_tokens,
)
from flowdrop_tui.core.records.liveness import live_pid
from flowdrop_tui.core.records.usage import Usage
from flowdrop_tui.core.records.usage import total as usage_total

RECORD_VERSION = 1


class Status(StrEnum):
    PENDING = "pending"
    RUNNING = "running"
    PAUSED = "paused"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"
    INTERRUPTED = "interrupted"


TERMINAL = frozenset({Status.COMPLETED, Status.FAILED, Status.CANCELLED})
ENDED = TERMINAL | {Status.INTERRUPTED}
LIVE = frozenset({Status.PENDING, Status.RUNNING})


def now_iso() -> str:
    """ISO-8601 UTC with milliseconds, as every event's ``t``."""
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def parse_time(stamp: Any) -> datetime | None:
    """An event's ``t`` as an aware datetime; None when it is not an ISO time."""
    if not isinstance(stamp, str):
        return None
    try:
        when = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except ValueError:
        return None
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)


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

    def commit(self, event: str, **fields: Any) -> dict[str, Any]:
        """Append one event and make it durable before returning (``created``, ``paused``,
        ``ended``: what is reported must survive a power cut). Raises ``OSError`` when
        the event is not wholly on disk."""
        record, line = self._prepared(event, fields)
        with self._lock:
            if self._write(line):
                _datasync(self._fd)
        return record

    def _prepared(self, event: str, fields: dict[str, Any]) -> tuple[dict[str, Any], bytes]:
        record, line = _line(event, fields)
        if len(line) > EVENT_MAX:
            record, line = self._bounded(record)
        return record, line

    def _write(self, line: bytes) -> bool:
        """Write one line whole; whether it was written (not by a forked copy of the run)."""
        if os.getpid() != self._owner:
            return False
        with self._lock:
            data = b"\n" + line if self._torn else line
            written = os.write(self._fd, data)  # one write per line: O_APPEND keeps it whole
            self._torn = written < len(data)  # short only when the disk is full
            remote = mirror.current()
            if remote is not None:  # what reached the disk, where it landed
                end = os.lseek(self._fd, 0, os.SEEK_CUR)
                remote.appended(self.path, data[:written], end - written)
            if self._torn:
                raise OSError(
                    errno.ENOSPC, f"{self.path}: only {written} of {len(data)} bytes written"
                )
        return True

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
                os.fdatasync(fd)  # on disk before the event that names it
            finally:
                os.close(fd)
            remote = mirror.current()
            if remote is not None:
                remote.wrote(self.path.parent / relative, raw)
        except OSError:
            # Not writable (full disk, a link): the event keeps the beginning only.
            return {SIDE_KEY: None, "bytes": len(raw), "preview": preview, "lost": True}
        return {SIDE_KEY: relative, "bytes": len(raw), "preview": preview}

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


def parse_lines(raw: bytes) -> list[dict[str, Any]]:
    """Every whole, parseable event in ``raw``; torn lines and junk are skipped."""
    events: list[dict[str, Any]] = []
    for line in raw.split(b"\n"):
        if not line.strip():
            continue
        try:
            item = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue
        if isinstance(item, dict) and isinstance(item.get("event"), str):
            events.append(item)
    return events


READ_CHUNK = 1 << 20  # a record is read this much at a time: a huge one streams
MAX_LINE = 64 << 20  # a longer line is skipped as junk (the engine writes none this long)


def line_batches(
    fd: int, offset: int = 0, end: int | None = None, chunk: int = READ_CHUNK
) -> Iterator[tuple[bytes, int]]:
    """Whole lines of ``fd`` from ``offset``, in batches of about ``chunk`` bytes:
    ``(lines, offset just past them)``. A line longer than a chunk is read whole (up to
    ``MAX_LINE``: then it is passed over, yielded as ``b""``); a last line without its
    newline (being written, or torn) is not yielded."""
    end = os.fstat(fd).st_size if end is None else end
    carry = bytearray()
    skipping = False
    position = offset
    while position < end:
        data = os.pread(fd, min(chunk, end - position), position)
        if not data:
            return
        start = position
        position += len(data)
        if skipping:
            first = data.find(b"\n")
            if first < 0:
                continue
            skipping = False
            data, start = data[first + 1 :], start + first + 1
            if data.rfind(b"\n") < 0:
                yield b"", start  # past the over-long line
        last = data.rfind(b"\n")
        if last < 0:
            carry += data
            if len(carry) > MAX_LINE:
                carry.clear()
                skipping = True
            continue
        lines = bytes(carry) + data[: last + 1]
        carry[:] = data[last + 1 :]
        yield lines, start + last + 1


def read_events(path: Path) -> list[dict[str, Any]]:
    """Every event in the record at ``path``, read a chunk at a time."""
    return [event for batch in event_batches(path) for event in batch]


def event_batches(path: Path) -> Iterator[list[dict[str, Any]]]:
    """The record's events a chunk at a time (a huge record never sits in memory whole),
    its last line too when it parses without its newline."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return
    try:
        size = os.fstat(fd).st_size
        done = 0
        for lines, after in line_batches(fd, 0, size):
            done = after
            yield parse_lines(lines)
        if done < size:
            yield parse_lines(os.pread(fd, min(size - done, MAX_LINE), done))
    except OSError:
        return
    finally:
        os.close(fd)


def read_first_event(path: Path) -> dict[str, Any] | None:
    """The first event (``created``) without reading the whole file."""
    for batch in event_batches(path):
        if batch:
            return batch[0]
    return None


def _position(value: Any) -> dict[str, Any]:
    position = {"currentNodeId": "", "iterationCount": 0, "iterator": None}
    if isinstance(value, dict):
        node = value.get("currentNodeId")
        count = value.get("iterationCount")
        iterator = value.get("iterator")
        if isinstance(node, str):
            position["currentNodeId"] = node
        if isinstance(count, int) and not isinstance(count, bool) and count >= 0:
            position["iterationCount"] = count
        if isinstance(iterator, int) and not isinstance(iterator, bool) and iterator >= 0:
            position["iterator"] = iterator
    return position


@dataclass
class RunInfo:
    """What a run's record says, folded from its events."""

    run: str
    path: Path
    key: str | None = None
    flow: str | None = None
    recorded: Status = Status.PENDING
    status: Status = Status.PENDING
    start: str | None = None
    source: str | None = None
    snapshot: str | None = None
    first_round: int = 1
    last_round: int | None = None
    rounds: int = 0
    started: str | None = None
    ended: str | None = None
    last_event: str | None = None  # the ``t`` of the last whole event read
    result: Any = None
    error: Any = None
    pid: int | None = None
    resumable: bool | None = None
    git_start: dict[str, Any] | None = None
    git_end: dict[str, Any] | None = None
    position: dict[str, Any] = field(default_factory=lambda: _position(None))
    carried: dict[str, Any] = field(default_factory=dict)
    key_rounds: dict[str, int] = field(default_factory=dict)
    called: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    pause_pending: bool = False
    stop_pending: bool = False
    stop_now: bool = False
    sessions: list[dict[str, Any]] = field(default_factory=list)
    # What each key's chain had spent before this run took it up (``chain_usage`` of
    # ``created`` and of a key's first ``call_started``); a key with none: nothing.
    chain_before: dict[str, Usage | None] = field(default_factory=dict)
    events: int = 0
    has_created: bool = False
    live_pid: int | None = None
    # SPEC §14/§15: budgets and drift, folded from created/resumed/paused/ended
    budget_limits: Limits = field(default_factory=dict)  # in effect (latest start)
    budget_overrides: Limits = field(default_factory=dict)  # --max-… given along the chain
    budget_carried: Used = field(default_factory=Used)  # the chain's totals before this run
    budget_reached: dict[str, Any] | None = None  # why it paused, until it is resumed
    tokens: int = 0  # what its closed sessions reported
    run_seconds: float = 0.0  # running time of its finished stretches
    running_since: str | None = None  # the ``t`` its current stretch began
    flow_digest: str | None = None  # of the flow folder it last started with
    git_last: dict[str, Any] | None = None  # the latest git facts its record holds

    @property
    def round(self) -> int:
        """The last round started in this run's chain for its key (0 before any)."""
        return self.last_round if self.last_round is not None else self.first_round - 1

    @property
    def stopped_at(self) -> str | None:
        """When the run stopped running: its recorded end; for a paused or interrupted run,
        which recorded none, its last event; ``None`` while it is live."""
        if self.ended is not None:
            return self.ended
        return None if self.status in LIVE else self.last_event

    def seconds(self, now: datetime | None = None) -> float | None:
        """How long it ran: from its start to ``stopped_at`` — fixed once it has stopped —
        or, while it is live, to ``now``. None when its start is unknown."""
        begin = parse_time(self.started)
        if begin is None:
            return None
        stopped = self.stopped_at
        finish = parse_time(stopped) if stopped is not None else now or datetime.now(UTC)
        if finish is None:
            return None
        return round(max(0.0, (finish - begin).total_seconds()), 3)

    @property
    def usage(self) -> Usage | None:
        """What the run's closed sessions spent, as recorded when each closed (SPEC §14);
        ``None`` when none reported usage."""
        return usage_total(
            Usage.from_json((s.get("closed") or {}).get("usage")) for s in self.sessions
        )

    def usage_of(self, key: str) -> Usage | None:
        """What the closed sessions opened under ``key`` in this run spent."""
        return usage_total(
            Usage.from_json((s.get("closed") or {}).get("usage"))
            for s in self.sessions
            if s.get("key") == key
        )

    def summary(self) -> dict[str, Any]:
        """The fields of ``runs --json`` (SPEC §11), ``duration`` (seconds, see ``seconds``)
        and ``usage``."""
        usage = self.usage
        return {
            "run": self.run,
            "flow": self.key,
            "status": str(self.status),
            "rounds": self.rounds,
            "first_round": self.first_round,
            "last_round": self.last_round,
            "started": self.started,
            "ended": self.ended,
            "picked_up_from": self.source,
            "start": self.start,
            "duration": self.seconds(),
            "budget": self.chain_budget().to_json(),
            "usage": usage.to_json() if usage is not None else None,
        }

    def own_used(self, now: str | None = None) -> Used:
        """What this run used itself: rounds it started, its running time (a stretch still
        open counts to ``now`` while it is live, else to its last event, as after a
        kill), the tokens its closed sessions reported."""
        seconds = self.run_seconds
        if self.running_since is not None:
            end = (now or now_iso()) if self.status in LIVE else self.last_event
            seconds += between(self.running_since, end)
        return Used(self.rounds, seconds, self.tokens)

    def chain_budget(self, now: str | None = None) -> ChainBudget:
        """The limits this run ran under and what its chain had used by its end (or now)."""
        return ChainBudget(dict(self.budget_limits), self.budget_carried + self.own_used(now))


class RunFold:
    """``fold`` that can be fed more events later: a live run's new lines are folded
    onto what was read before, so following a week-long run never re-reads its record."""

    def __init__(self, run_id: str, path: Path) -> None:
        self.info = RunInfo(run=run_id, path=path)
        self.in_round_main = False

    def feed(self, events: list[dict[str, Any]]) -> RunInfo:
        """Fold ``events`` (the next lines of the record, in order); returns the run so far."""
        info = self.info
        info.events += len(events)
        for ev in events:
            self._apply(info, ev)
            if isinstance(ev.get("t"), str):
                info.last_event = ev["t"]
        if info.key is not None and info.key not in info.key_rounds:
            info.key_rounds[info.key] = info.first_round - 1
        info.status = info.recorded
        return info

    def _apply(self, info: RunInfo, ev: dict[str, Any]) -> None:
        name = ev["event"]
        if name == "created":
            info.has_created = True
            info.key = ev.get("key") if isinstance(ev.get("key"), str) else None
            info.flow = ev.get("flow") if isinstance(ev.get("flow"), str) else None
            info.start = ev.get("start")
            info.source = ev.get("source")
            info.snapshot = ev.get("snapshot")
            first = ev.get("first_round")
            info.first_round = first if isinstance(first, int) and first >= 1 else 1
            info.started = ev.get("t")
            info.pid = ev.get("pid")
            info.resumable = ev.get("resumable")
            info.git_start = ev.get("git")
            info.position = _position(ev.get("position"))
            carried = ev.get("carried")
            info.carried = carried if isinstance(carried, dict) else {}
            if isinstance(info.key, str):
                info.chain_before[info.key] = Usage.from_json(ev.get("chain_usage"))
            info.recorded = Status.PENDING
            self._budget(info, ev)
            info.budget_carried = Used.from_record((ev.get("budget") or {}).get("carried"))
            info.git_last = info.git_start
        elif name in ("started", "resumed"):
            info.recorded = Status.RUNNING
            info.pid = ev.get("pid", info.pid)
            if info.running_since is not None:  # a stretch a kill cut short
                info.run_seconds += between(info.running_since, info.last_event)
            info.running_since = ev.get("t") if isinstance(ev.get("t"), str) else None
            if name == "resumed":
                self._budget(info, ev)
                info.budget_reached = None
                if isinstance(ev.get("git"), dict):
                    info.git_last = ev["git"]
            # A process taking the run starts with no request pending: one recorded
            # before (a `stop` of the paused run killed before it could close it) was
            # never acted on, and this later resume is what was asked last.
            info.pause_pending = info.stop_pending = info.stop_now = False
        elif name == "round_started":
            key, number = ev.get("key"), ev.get("round")
            if isinstance(number, int) and isinstance(key, str):
                info.key_rounds[key] = max(number, info.key_rounds.get(key, 0))
                if key == info.key:
                    info.rounds += 1
                    info.last_round = max(number, info.last_round or 0)
                    self.in_round_main = True
                    info.position["currentNodeId"] = key
                    if isinstance(ev.get("index"), int):
                        info.position["iterator"] = ev["index"]
                else:
                    info.position["currentNodeId"] = key
        elif name == "round_ended":
            key = ev.get("key")
            if key == info.key:
                self.in_round_main = False
                if ev.get("outcome") == "ok":
                    info.position["iterationCount"] += 1
                    if isinstance(ev.get("index"), int):
                        info.position["iterator"] = ev["index"] + 1
                info.position["currentNodeId"] = ""
            else:
                info.position["currentNodeId"] = info.key if self.in_round_main else ""
        elif name == "call_started":
            key = ev.get("key")
            if isinstance(key, str):
                if key not in info.called:
                    info.called.append(key)
                if key not in info.chain_before:
                    info.chain_before[key] = Usage.from_json(ev.get("chain_usage"))
                info.position["currentNodeId"] = key
                first = ev.get("first_round")
                if isinstance(first, int) and key not in info.key_rounds:
                    info.key_rounds[key] = first - 1
        elif name == "call_ended":
            info.position["currentNodeId"] = (info.key or "") if self.in_round_main else ""
        elif name == "warning":
            info.warnings.append(str(ev.get("message", "")))
        elif name == "stop_requested":
            info.stop_pending = True
            info.stop_now = info.stop_now or bool(ev.get("now"))
        elif name == "pause_requested":
            info.pause_pending = True
        elif name == "paused":
            info.recorded = Status.PAUSED
            info.pause_pending = False
            info.position = _position(ev.get("position"))
            self._stretch_ended(info, ev)
        elif name == "budget_reached":
            info.budget_reached = {k: ev.get(k) for k in ("budget", "limit", "used")}
        elif name == "ended":
            outcome = ev.get("outcome")
            info.recorded = (
                Status(outcome)
                if outcome in ("completed", "failed", "cancelled")
                else Status.FAILED
            )
            info.ended = ev.get("t")
            info.result = ev.get("result")
            info.error = side_value(info.path, ev.get("error"))  # small, and shown as is
            info.git_end = ev.get("git")
            if "position" in ev:
                info.position = _position(ev.get("position"))
            info.pause_pending = info.stop_pending = False
            self._stretch_ended(info, ev)
        elif name == "session_opened":
            info.sessions.append(dict(ev))
        elif name == "session_closed":
            info.tokens += session_tokens(ev.get("usage"))
            for session in reversed(info.sessions):
                if session.get("session") == ev.get("session"):
                    session["closed"] = dict(ev)
                    break

    @staticmethod
    def _budget(info: RunInfo, ev: dict[str, Any]) -> None:
        budget = ev.get("budget")
        if isinstance(budget, dict):
            info.budget_limits = clean_limits(budget.get("limits"))
            info.budget_overrides = clean_limits(budget.get("overrides"))
        digest = ev.get("flow_digest")
        if isinstance(digest, str):
            info.flow_digest = digest

    @staticmethod
    def _stretch_ended(info: RunInfo, ev: dict[str, Any]) -> None:
        if info.running_since is not None:
            info.run_seconds += between(info.running_since, ev.get("t"))
            info.running_since = None
        if isinstance(ev.get("git"), dict):
            info.git_last = ev["git"]


def fold(run_id: str, path: Path, events: list[dict[str, Any]]) -> RunInfo:
    """The run as its events describe it (its *recorded* status; see ``load_run``)."""
    return RunFold(run_id, path).feed(events)


def derive_status(info: RunInfo) -> RunInfo:
    """Turn a recorded live status into ``interrupted`` when no process holds the run."""
    if info.recorded in LIVE:
        info.live_pid = live_pid(info.path)
        info.status = info.recorded if info.live_pid is not None else Status.INTERRUPTED
    else:
        info.status = info.recorded
    return info


def load_run(layout: Layout, run_id: str) -> RunInfo:
    """A run's record, folded, with its status checked against liveness."""
    path = layout.run_dir(run_id)
    if not path.is_dir():
        raise NotFoundError(f"no run {run_id} in {layout.runs}")
    run = RunFold(run_id, path)
    for batch in event_batches(path / CYCLE):
        run.feed(batch)
    return derive_status(run.info)


def list_run_ids(layout: Layout) -> list[str]:
    """Every run id in the workspace, oldest first (ids sort by start)."""
    try:
        names = os.listdir(layout.runs)
    except OSError:
        return []
    return sorted(name for name in names if RUN_ID_RE.match(name))
