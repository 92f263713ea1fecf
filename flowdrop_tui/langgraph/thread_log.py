"""One LangGraph thread's checkpoints on disk: an append-only log of whole lines.

SPEC §22. The log is ``.flowdrop/langgraph/<thread>/checkpoints.jsonl``: a line per
checkpoint (its serialized body, metadata and the channel blobs it brought) and a line
per ``put_writes`` call (the key sets within a round). A line is written with one
append and synced before the call returns, as a key set is (SPEC §5.1); a kill leaves
at most one torn last line, which readers skip and the next writer starts after. The
rare whole-log changes (``prune``, ``delete_for_runs``) replace the file atomically
(``write_atomic``). Appends and replacements take the thread's lock, so two processes
on one thread interleave whole lines; readers take no lock.

This module knows bytes, not LangGraph: values arrive serialized (``(type, bytes)``).
"""

from __future__ import annotations

import base64
import contextlib
import os
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from flowdrop_tui.core.files import locks
from flowdrop_tui.core.files.atomic import datasync, open_fd, sync_dir, write_atomic
from flowdrop_tui.core.paths import Layout, key_filename, validate_key

LOG = "checkpoints.jsonl"
LOCK = "thread.lock"
NAME = "thread"  # the thread id, whole (the folder's name may be a digest of it)
FOLDER = "langgraph"

Typed = tuple[str, bytes]
# (task_id, channel, value, task_path) — a pending write as stored
Write = tuple[str, str, Typed, str]


def _enc(typed: Typed) -> list[str]:
    return [typed[0], base64.b64encode(typed[1]).decode()]


def _dec(raw: Any) -> Typed:
    return (str(raw[0]), base64.b64decode(raw[1]))


@dataclass
class Row:
    """One checkpoint as stored: its ids, serialized body and metadata, its run."""

    ns: str
    id: str
    parent: str | None
    checkpoint: Typed
    metadata: Typed
    run_id: str | None
    versions: dict[str, Any] = field(default_factory=dict)  # channel -> version it reads
    blobs: list[tuple[str, Any, Typed]] = field(default_factory=list)  # (channel, version, v)


@dataclass
class Fold:
    """What the log says now: checkpoints, blobs by version, writes by checkpoint."""

    rows: dict[tuple[str, str], Row] = field(default_factory=dict)
    blobs: dict[tuple[str, str, Any], Typed] = field(default_factory=dict)
    writes: dict[tuple[str, str], dict[tuple[str, int], Write]] = field(default_factory=dict)

    def apply(self, line: dict[str, Any]) -> None:
        kind = line.get("k")
        if kind == "c":
            blobs = [(str(b[0]), as_version(b[1]), _dec(b[2:])) for b in line.get("b") or []]
            row = Row(
                ns=str(line["ns"]),
                id=str(line["id"]),
                parent=line.get("p"),
                checkpoint=_dec(line["cp"]),
                metadata=_dec(line["md"]),
                run_id=line.get("run"),
                versions=dict(line.get("v") or {}),
                blobs=blobs,
            )
            self.rows[(row.ns, row.id)] = row
            for channel, version, value in blobs:
                self.blobs[(row.ns, channel, version)] = value
        elif kind == "w":
            ns, cid = str(line["ns"]), str(line["id"])
            stored = self.writes.setdefault((ns, cid), {})
            task, path = str(line["task"]), str(line.get("path") or "")
            for idx, channel, *value in line["w"]:
                inner = (task, int(idx))
                if inner[1] >= 0 and inner in stored:
                    continue  # a retried task's write is kept once
                stored[inner] = (task, str(channel), _dec(value), path)

    def lines(self, thread_id: str) -> Iterator[bytes]:
        """The log that holds exactly this fold (for a whole-log rewrite): each blob a
        kept checkpoint reads goes with the first of them to read it."""
        emitted: set[tuple[str, str, Any]] = set()
        for row in sorted(self.rows.values(), key=lambda r: (r.id, r.ns)):
            blobs = []
            for channel, version in row.versions.items():
                key = (row.ns, channel, as_version(version))
                if key in self.blobs and key not in emitted:
                    emitted.add(key)
                    blobs.append((channel, version, self.blobs[key]))
            kept = Row(
                row.ns,
                row.id,
                row.parent,
                row.checkpoint,
                row.metadata,
                row.run_id,
                row.versions,
                blobs,
            )
            yield checkpoint_line(thread_id, kept)
            for (task, idx), (_, channel, value, path) in (
                self.writes.get((row.ns, row.id)) or {}
            ).items():
                yield writes_line(row.ns, row.id, task, path, [(idx, channel, value)])


def as_version(raw: Any) -> Any:
    return raw if not isinstance(raw, list) else tuple(raw)


def checkpoint_line(thread_id: str, row: Row) -> bytes:
    blobs = [[channel, version, *_enc(value)] for channel, version, value in row.blobs]
    line = {
        "k": "c",
        "th": thread_id,
        "ns": row.ns,
        "id": row.id,
        "p": row.parent,
        "run": row.run_id,
        "cp": _enc(row.checkpoint),
        "md": _enc(row.metadata),
        "v": row.versions,
        "b": blobs,
    }
    return orjson.dumps(line) + b"\n"


def writes_line(
    ns: str,
    checkpoint_id: str,
    task_id: str,
    task_path: str,
    writes: Iterable[tuple[int, str, Typed]],
) -> bytes:
    line = {
        "k": "w",
        "ns": ns,
        "id": checkpoint_id,
        "task": task_id,
        "path": task_path,
        "w": [[idx, channel, *_enc(value)] for idx, channel, value in writes],
    }
    return orjson.dumps(line) + b"\n"


def threads_root(layout: Layout) -> Path:
    return layout.root / FOLDER


class ThreadLog:
    """One thread's log, folded in memory; only what was appended is read again."""

    def __init__(self, layout: Layout, thread_id: str) -> None:
        self.thread_id = validate_key(thread_id)
        self.folder = threads_root(layout) / key_filename(thread_id)
        self.path = self.folder / LOG
        self._fold = Fold()
        self._seen: tuple[int, int] | None = None  # (inode, offset read to)
        self._mutex = threading.Lock()

    # reading -------------------------------------------------------------------------

    def fold(self) -> Fold:
        """The log as it is on disk now (whole lines only)."""
        with self._mutex:
            self._refresh()
            return self._fold

    def _refresh(self) -> None:
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            self._fold, self._seen = Fold(), None
            return
        try:
            st = os.fstat(fd)
            if self._seen is None or self._seen[0] != st.st_ino or st.st_size < self._seen[1]:
                self._fold, self._seen = Fold(), (st.st_ino, 0)
            start = self._seen[1]
            if st.st_size == start:
                return
            raw = os.pread(fd, st.st_size - start, start)
        finally:
            os.close(fd)
        end = raw.rfind(b"\n") + 1  # a torn last line waits for its end (or is skipped)
        for chunk in raw[:end].splitlines():
            try:
                line = orjson.loads(chunk)
            except orjson.JSONDecodeError:
                continue  # a line a kill tore, followed by later appends
            if isinstance(line, dict):
                try:
                    self._fold.apply(line)
                except (KeyError, TypeError, ValueError, IndexError):
                    continue
        self._seen = (self._seen[0], start + end)

    # writing -------------------------------------------------------------------------

    def append(self, data: bytes) -> None:
        """Append whole lines, synced before returning (as durable as a key set)."""
        with self._mutex, self._locked():
            created = not self.path.exists()
            fd = open_fd(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT)
            try:
                size = os.fstat(fd).st_size
                if size and os.pread(fd, 1, size - 1) != b"\n":
                    data = b"\n" + data  # after a torn line a kill left
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
                datasync(fd)
            finally:
                os.close(fd)
            if created:
                sync_dir(self.folder)

    def rewrite(self, change: Callable[[Fold], bool]) -> bool:
        """Under the lock: read the log whole, let ``change(fold)`` edit it (returning
        whether it did), and replace the log by one holding exactly that (atomically)."""
        with self._mutex, self._locked():
            self._refresh()
            try:
                if not change(self._fold):
                    return False
                data = b"".join(self._fold.lines(self.thread_id))
                if data:
                    write_atomic(self.path, data)
                else:
                    self._unlink()
                return True
            finally:
                self._seen = None  # read again: the fold was edited, the write may have failed

    def delete(self) -> None:
        with self._mutex, self._locked():
            self._unlink()
            self._fold, self._seen = Fold(), None

    def _unlink(self) -> None:
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            return
        sync_dir(self.folder)

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        """The thread's lock, its folder made first. The folder's ``thread`` file is
        written under the lock: ``write_atomic`` has one temporary name per file, so two
        processes opening one new thread at once would rename each other's away."""
        if not (self.folder / NAME).is_file():
            root = self.folder.parent
            if not root.is_dir():
                root.mkdir(exist_ok=True)
                sync_dir(root.parent)  # .flowdrop/ names langgraph/ durably
            self.folder.mkdir(exist_ok=True)
        with locks.exclusive(self.folder / LOCK):
            if not (self.folder / NAME).is_file():
                write_atomic(self.folder / NAME, self.thread_id.encode())
                sync_dir(self.folder.parent)
            yield


def thread_ids(layout: Layout) -> list[str]:
    """Every thread with a log in the workspace."""
    root = threads_root(layout)
    found: list[str] = []
    try:
        folders = sorted(root.iterdir())
    except FileNotFoundError:
        return found
    for folder in folders:
        if not (folder / LOG).is_file():
            continue
        try:
            found.append((folder / NAME).read_text())
        except (OSError, UnicodeDecodeError):
            continue
    return found
