"""Starts that wait for a worker (remote mode): what ``runs`` and the UI show of a
``run FLOW`` no worker has taken yet, so a start left waiting is never invisible.

A replica's sync writes ``.flowdrop/queued.json`` from PostgreSQL's ``fd_starts`` (the
rows still ``asked`` or ``forwarding``): a start withdrawn (Ctrl-C, SIGTERM, SIGHUP,
the time limit) or taken by a worker is gone from it at the next sync, and the taken
one's run appears in its place. Local mode has none: a start there is a run at once.

Both ends are here: ``write`` (the sync) and ``read`` (``runs``, the UI)."""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from typing import Any

import orjson

from flowdrop_tui.core.files.atomic import write_atomic
from flowdrop_tui.core.paths import Layout

QUEUED = "queued.json"
VERSION = 1
_MAX = 1 << 20  # bytes read at most: a space with thousands of queued starts is not sane


@dataclass(frozen=True)
class QueuedStart:
    """One start no worker has taken yet."""

    key: str
    asked: str  # ISO time the client asked
    queue: str  # the task queue it waits on
    asked_by: str | None  # the database role that asked (None: not known)

    def to_json(self) -> dict[str, Any]:
        return {"key": self.key, "asked": self.asked, "queue": self.queue, "by": self.asked_by}

    def runs_row(self) -> dict[str, Any]:
        """Its row in ``runs --json``: the shape of a run's, status ``pending`` (SPEC §3:
        "not started") and ``run`` null — no run exists until a worker takes it."""
        return {
            "run": None, "flow": self.key, "status": "pending", "rounds": 0,
            "first_round": None, "last_round": None, "started": None, "ended": None,
            "picked_up_from": None, "start": None, "duration": None, "budget": None,
            "usage": None, "pinned": False, "paused_by": None, "waiting": None, "gate": None,
        }  # fmt: skip


def write(layout: Layout, starts: list[QueuedStart]) -> bool:
    """Make the replica's list ``starts``; whether it changed (unchanged: no write, so a
    sync every few seconds does not wake the UI's watch)."""
    path = layout.root / QUEUED
    if not starts:
        try:
            os.unlink(path)
        except FileNotFoundError:
            return False
        return True
    data = orjson.dumps({"v": VERSION, "starts": [start.to_json() for start in starts]})
    with contextlib.suppress(OSError):
        if path.read_bytes() == data:
            return False
    write_atomic(path, data, durable=False)  # PostgreSQL is the truth: the next sync redoes it
    return True


def forget(layout: Layout) -> None:
    """Local mode: a ``queued.json`` left from when the workspace was in remote mode is
    no start of this mode's (a start here is a run at once): removed, never shown."""
    with contextlib.suppress(OSError):
        os.unlink(layout.root / QUEUED)


def read(layout: Layout, key: str | None = None) -> list[QueuedStart]:
    """The starts waiting for a worker (of ``key`` only, when given), oldest first; none
    when there is no list or it is not one the sync wrote."""
    try:
        fd = os.open(layout.root / QUEUED, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return []
    try:
        data = orjson.loads(os.read(fd, _MAX))
    except (OSError, orjson.JSONDecodeError):
        return []
    finally:
        os.close(fd)
    if not isinstance(data, dict) or data.get("v") != VERSION:
        return []
    found = []
    for item in data.get("starts") or []:
        if not isinstance(item, dict):
            continue
        fields = (item.get("key"), item.get("asked"), item.get("queue"))
        if not all(isinstance(value, str) for value in fields):
            continue
        by = item.get("by")
        start = QueuedStart(*fields, by if isinstance(by, str) else None)  # type: ignore[arg-type]
        if key is None or start.key == key:
            found.append(start)
    return found


def queued_words(start: QueuedStart) -> str:
    """``counter: queued since 10:01:02, waiting for a worker on task queue q (asked by alice)``."""
    since = start.asked[:19].replace("T", " ")
    by = f" (asked by {start.asked_by})" if start.asked_by else ""
    return (
        f"{start.key}: queued since {since}, waiting for a worker on task queue {start.queue}{by}"
    )
