"""A replica of a space's remote records, in the ordinary file layout.

``sync(layout, store)`` pulls the change feed (``fd_changes``) after the last id it
applied (kept in ``.flowdrop/cache/remote-replica.json``) and makes the files under
``.flowdrop/runs/<id>/`` what the runs' own processes wrote, byte for byte: whole
files replaced atomically, appends in offset order (up to a gap, an append whose
predecessor has not committed yet: the rest comes with the next sync), a new record
built in its hidden ``.new-`` folder and renamed into place, a pruned one removed.
Liveness is the marker ``remote-live.json`` (``records/run_record/liveness.py``), written and
removed from PostgreSQL's ``fd_runs`` only: the replica never writes a run record,
and never repairs one (a run whose marker went and that has no end reads as
interrupted, as after a ``kill -9`` here). The index and ``keys/<key>.runs`` are
brought up to date as a local run would have, so every reader works unchanged.

``Follower`` keeps a replica current from a thread: ``LISTEN fd_changes``, a sync on
each notification for the space, and one every ``interval`` seconds in case a
notification was missed (a dropped connection loses them).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import psycopg

from flowdrop_tui.core.errors import FlowdropError
from flowdrop_tui.core.files import locks
from flowdrop_tui.core.files.atomic import write_atomic
from flowdrop_tui.core.paths import (
    CYCLE,
    LIVE_LOCK,
    REMOTE_LIVE,
    REQUESTS,
    RUN_ID_RE,
    SESSIONS,
    Layout,
)
from flowdrop_tui.core.records.listing import index, key_runs
from flowdrop_tui.core.records.log.event_lines import events_named, read_first_event
from flowdrop_tui.core.records.run_record import run_fold, trash, worker_mark
from flowdrop_tui.core.records.run_record.folder import hidden_folder
from flowdrop_tui.core.remote.postgres import queued_sync
from flowdrop_tui.core.remote.postgres.store import CHANNEL, Change, PostgresStore

CURSOR = "remote-replica.json"
LOCK = "remote-replica.lock"
CURSOR_VERSION = 1
_BATCH = 2000
_SYNC_WAIT = 30.0  # another process's sync in progress (or stopped with Ctrl-Z)
# A stored path is input: only names the engine makes, never a way out of the folder.
_RELPATH_RE = re.compile(
    r"^[A-Za-z0-9_][A-Za-z0-9._-]{0,200}(/[A-Za-z0-9_][A-Za-z0-9._-]{0,200}){0,3}$"
)
_NEVER_STORED = frozenset({LIVE_LOCK, REMOTE_LIVE, worker_mark.WORKER_MARK, REQUESTS, SESSIONS})


@dataclass
class SyncReport:
    """What one ``sync`` applied: the runs whose files or liveness changed, the runs
    removed, and the last change id applied."""

    changed: set[str] = field(default_factory=set)
    deleted: set[str] = field(default_factory=set)
    last: int = 0


@dataclass
class _Work:
    publish: bool = False
    deleted: bool = False
    files: dict[str, str] = field(default_factory=dict)  # relpath -> "file" | "line"


def _cursor_path(layout: Layout) -> Path:
    return layout.cache / CURSOR


def _read_cursor(layout: Layout, space: str) -> int:
    try:
        data = orjson.loads(_cursor_path(layout).read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return 0
    if (
        isinstance(data, dict)
        and data.get("v") == CURSOR_VERSION
        and data.get("space") == space
        and type(data.get("last")) is int
    ):
        return int(data["last"])
    return 0  # another space, or unreadable: start over (every write is idempotent)


def _write_cursor(layout: Layout, space: str, last: int) -> None:
    data = {"v": CURSOR_VERSION, "space": space, "last": last}
    write_atomic(_cursor_path(layout), orjson.dumps(data), durable=False)


def _safe_relpath(relpath: str | None) -> str | None:
    if relpath is None or not _RELPATH_RE.match(relpath) or ".." in relpath.split("/"):
        return None
    return None if relpath.split("/")[0] in _NEVER_STORED else relpath


def sync(layout: Layout, store: PostgresStore) -> SyncReport:
    """Apply every change after the last one applied; what was applied.

    Safe from several processes at once (a lock in ``cache/``), and after a kill at any
    point (the cursor moves only after the files; applying a change twice is a no-op)."""
    store.ensure_schema()  # a space no worker wrote to yet has no tables (one read after)
    layout.ensure()
    layout.folder(layout.cache)
    report = SyncReport()
    with locks.exclusive(layout.cache / LOCK, wait=_SYNC_WAIT):
        last = _read_cursor(layout, store.space)
        report.last = last
        while True:
            changes = store.changes_after(last, _BATCH)
            if not changes:
                if last and store.last_change_id() < last:
                    # The feed restarted (a new database): everything again from the start.
                    last = 0
                    continue
                break
            _apply(layout, store, changes, report)
            last = changes[-1].id
            _write_cursor(layout, store.space, last)
            report.last = last
            if len(changes) < _BATCH:
                break
        queued_sync.refresh(layout, store)  # the starts no worker took yet (`runs`, the UI)
    return report


def _collapse(changes: list[Change]) -> dict[str, _Work]:
    work: dict[str, _Work] = {}
    for change in changes:
        if not RUN_ID_RE.match(change.run_id):
            continue  # not a run id: nothing here may name a path
        item = work.setdefault(change.run_id, _Work())
        if change.kind == "delete":
            work[change.run_id] = _Work(deleted=True)
        elif change.kind == "publish":
            item.deleted = False
            item.publish = True
        elif change.kind in ("file", "line"):
            item.deleted = False
            relpath = _safe_relpath(change.relpath)
            if relpath is not None and item.files.get(relpath) != "file":
                item.files[relpath] = change.kind
        # "live": the marker is refreshed for every run touched
    return work


def _apply(layout: Layout, store: PostgresStore, changes: list[Change], report: SyncReport) -> None:
    work = _collapse(changes)
    # Everything fetched first (the network), then written under the index lock (local
    # I/O only), so readers wait on us for no longer than a disk write.
    fetched: dict[str, tuple[_Work, dict[str, tuple[str, bytes]], dict[str, Any] | None]] = {}
    for run_id, item in work.items():
        if item.deleted:
            continue
        run_dir = layout.runs / run_id
        whole = item.publish or not run_dir.is_dir()
        wanted = store.relpaths(run_id) if whole else list(item.files)
        files: dict[str, tuple[str, bytes]] = {}
        for relpath in wanted:
            safe = _safe_relpath(relpath)
            if safe is None:
                continue
            if whole or item.files[safe] == "file":
                data = store.read_file(run_id, safe)
                if data is not None:
                    files[safe] = ("file", data)
            else:
                start = _size(run_dir / safe)
                data = store.read_file(run_id, safe, start)
                if data:
                    files[safe] = ("line", data)
        item.publish = whole
        fetched[run_id] = (item, files, store.run_info(run_id))
    deleted = [run_id for run_id, item in work.items() if item.deleted]
    try:
        with locks.exclusive(layout.index_lock, wait=index.WRITE_WAIT):
            _write_locked(layout, fetched, deleted, report)
    except locks.LockTimeout:
        _write_locked(layout, fetched, deleted, report, with_index=False)
        index.invalidate(layout)  # readers rebuild it once the lock is free
    for run_id in deleted:
        trash.purge(layout, run_id)


def _size(path: Path) -> int:
    try:
        return os.stat(path, follow_symlinks=False).st_size
    except FileNotFoundError:
        return 0


def _write_locked(
    layout: Layout,
    fetched: dict[str, tuple[_Work, dict[str, tuple[str, bytes]], dict[str, Any] | None]],
    deleted: list[str],
    report: SyncReport,
    *,
    with_index: bool = True,
) -> None:
    for run_id, (item, files, info) in sorted(fetched.items()):
        run_dir = layout.runs / run_id
        if locks.holder_pid(run_dir / LIVE_LOCK) is not None:
            # A process here holds it (this workspace is the worker's own): its writer
            # is the truth, and a sync must never write under it.
            continue
        if item.publish and not run_dir.is_dir():
            if not files:
                continue  # nothing stored (pruned meanwhile): nothing to make
            key = _created_key(files.get(CYCLE, ("", b""))[1])
            if with_index and key is not None:
                # before the record appears, as creation does (key_runs.py)
                key_runs.append_locked(layout, key, run_id, durable=False)
            _build(layout, run_id, files, info)
        elif run_dir.is_dir():
            for relpath, (how, data) in sorted(files.items()):
                _put(run_dir, relpath, how, data)
            _mark(run_dir, info)
        report.changed.add(run_id)
    gone_keys: set[str] = set()
    for run_id in deleted:
        key = _key_of(layout, run_id)
        if trash.discard(layout, run_id):
            report.deleted.add(run_id)
            if key is not None:
                gone_keys.add(key)
    if with_index:
        touched = sorted(report.changed)
        if touched:
            index.update_locked(layout, lambda keys: _refresh_entries(layout, keys, touched))
        if gone_keys:
            key_runs.compact_locked(layout, gone_keys)


def _build(
    layout: Layout, run_id: str, files: dict[str, tuple[str, bytes]], info: dict[str, Any] | None
) -> None:
    """A new record as creation makes one: built hidden, renamed into place whole."""
    hidden = hidden_folder(layout, run_id)
    shutil.rmtree(hidden, ignore_errors=True)  # a sync killed halfway left it
    hidden.mkdir()
    (hidden / SESSIONS).mkdir()
    (hidden / REQUESTS).mkdir()
    for relpath, (_, data) in sorted(files.items()):
        _put(hidden, relpath, "file", data)
    _mark(hidden, info)
    os.rename(hidden, layout.runs / run_id)


def _put(run_dir: Path, relpath: str, how: str, data: bytes) -> None:
    path = run_dir / relpath
    if "/" in relpath:
        path.parent.mkdir(parents=True, exist_ok=True)
    if how == "file":
        write_atomic(path, data, durable=False)  # PostgreSQL is the durable copy
        return
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(path, flags, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
    finally:
        os.close(fd)


def _mark(run_dir: Path, info: dict[str, Any] | None) -> None:
    """``remote-live.json`` while PostgreSQL says the run is live on a known process
    (the run child says so itself right after it publishes); none otherwise."""
    marker = run_dir / REMOTE_LIVE
    if info is not None:
        worker_mark.mark(run_dir, info.get("worker"), info.get("host"))  # kept once it ends
    if info is not None and info.get("live") and isinstance(info.get("pid"), int):
        data = {
            "v": 1,
            "pid": info["pid"],
            "host": info.get("host"),
            "worker": info.get("worker"),
            "key": info.get("key"),
            "epoch": info.get("epoch"),
        }
        write_atomic(marker, orjson.dumps(data), durable=False)
    else:
        with contextlib.suppress(FileNotFoundError):
            marker.unlink()


def _created_key(cycle: bytes) -> str | None:
    """The key a record's ``created`` event (its first line) names."""
    first = cycle.split(b"\n", 1)[0]
    try:
        event = orjson.loads(first)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(event, dict) or event.get("event") != "created":
        return None
    key = event.get("key")
    return key if isinstance(key, str) else None


def _key_of(layout: Layout, run_id: str) -> str | None:
    event = read_first_event(layout.runs / run_id / CYCLE)
    key = event.get("key") if event is not None and event.get("event") == "created" else None
    return key if isinstance(key, str) else None


def _refresh_entries(layout: Layout, keys: dict[str, Any], run_ids: list[str]) -> None:
    """What the runs' own processes did to the index, done again from their records:
    a run becomes the last run of its key and of each key it called (unless a newer run
    already is); an entry naming it takes its status and round."""
    for run_id in run_ids:
        run_dir = layout.runs / run_id
        if not run_dir.is_dir():
            continue
        info = run_fold.fold_run(layout, run_id, run_dir)
        if not info.has_created or info.key is None:
            continue
        flows: dict[str, str | None] = {info.key: info.flow}
        if info.called:
            for event in events_named(run_dir / CYCLE, "call_started"):  # streamed
                if isinstance(event.get("key"), str):
                    flow = event.get("flow")
                    flows.setdefault(event["key"], flow if isinstance(flow, str) else None)
        for key, flow in flows.items():
            entry = keys.get(key)
            if entry is None or str(entry.get("last_run", "")) < run_id:
                keys[key] = index.entry_for(info, key, flow)
            elif entry.get("last_run") == run_id:
                entry["status"] = str(info.recorded)
                entry["round"] = info.key_rounds.get(key, entry.get("round", 0))


class Follower:
    """Keeps a workspace's replica current from a thread of its own.

    ``on_sync(report)`` is called (from that thread) after every sync that applied
    something; ``on_ok()`` after every sync that succeeded, whether it applied anything
    or not (following works again); ``on_error(exc)`` when PostgreSQL cannot be reached.
    It then retries with backoff, 0.2 s doubling up to ``max_delay``: a reader waiting
    out an outage with a deadline needs the retry that comes after the server is back
    to come well before the deadline (doubling to 10 s, a 20 s outage was seen next at
    32.6 s)."""

    def __init__(
        self,
        layout: Layout,
        url: str,
        space: str,
        *,
        on_sync: Callable[[SyncReport], None] | None = None,
        on_ok: Callable[[], None] | None = None,
        on_error: Callable[[Exception], None] | None = None,
        interval: float = 2.0,
        max_delay: float = 10.0,
    ) -> None:
        self.layout = layout
        self.store = PostgresStore(url, space)
        self.on_sync = on_sync
        self.on_ok = on_ok
        self.on_error = on_error
        self.interval = interval
        self.max_delay = max_delay
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._listener: psycopg.Connection[Any] | None = None

    def start(self) -> None:
        if self._thread is not None:
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="flowdrop-replica", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        thread, self._thread = self._thread, None
        if thread is not None:
            thread.join(timeout)
        self.store.close()

    def _run(self) -> None:
        delay = 0.2
        while not self._stop.is_set():
            try:
                self._follow()
                delay = 0.2
            except (FlowdropError, psycopg.Error, OSError) as exc:
                self._close_listener()
                if self.on_error is not None:
                    with contextlib.suppress(Exception):
                        self.on_error(exc)
                self._stop.wait(delay)
                delay = min(delay * 2, self.max_delay)
        self._close_listener()

    def _follow(self) -> None:
        listener = self.store.connect()
        self._listener = listener
        listener.execute(f"LISTEN {CHANNEL}")
        self._sync()
        synced_at = time.monotonic()
        tick = min(0.5, self.interval)  # how soon stop() is noticed
        while not self._stop.is_set():
            notified = False
            for note in listener.notifies(timeout=tick, stop_after=1):
                notified = notified or note.payload == self.store.space
            if notified:  # a burst (a key set a millisecond): what is pending, one sync
                for _ in listener.notifies(timeout=0.0):
                    pass
            if notified or time.monotonic() - synced_at >= self.interval:
                self._sync()
                synced_at = time.monotonic()

    def _sync(self) -> None:
        report = sync(self.layout, self.store)
        if self.on_ok is not None:
            self.on_ok()
        if (report.changed or report.deleted) and self.on_sync is not None:
            self.on_sync(report)

    def _close_listener(self) -> None:
        listener, self._listener = self._listener, None
        if listener is not None:
            with contextlib.suppress(psycopg.Error):
                listener.close()
