"""Requests from other processes to a run: both ends of the request file.

A request (stop, stop now, pause) is a small file in the run's ``requests/``
folder, created with ``O_EXCL`` so two requests of one kind cannot both be
pending. The asker posts it; the run takes it between rounds (and a watcher
thread within a fraction of a second) and records it with who asked.
"""

from __future__ import annotations

import contextlib
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from flowdrop_tui.core.files.regular import read_regular
from flowdrop_tui.core.paths import REQUESTS, inside, refuse_link

STOP = "stop"
STOP_NOW = "stop-now"
PAUSE = "pause"
KINDS = (STOP_NOW, STOP, PAUSE)


@dataclass(frozen=True)
class Request:
    kind: str
    by: dict[str, Any]


def post(run_dir: Path, kind: str, by: dict[str, Any]) -> bool:
    """The asker's end: leave a request; False when one of that kind is already pending."""
    folder = run_dir / REQUESTS
    inside(run_dir.parent.parent, folder)  # never through a link planted in the records
    with contextlib.suppress(FileExistsError):
        folder.mkdir()
    refuse_link(folder)  # (made meanwhile: looked at again)
    # Written whole under a hidden name, then linked into place: the run, which may
    # look at any instant, never reads a request half-written (it would lose who
    # asked), and link() refuses a name that exists — a pending request or a link.
    draft = folder / f".{kind}.{os.getpid()}.{threading.get_ident()}.draft"
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | os.O_NOFOLLOW
    fd = os.open(draft, flags, 0o644)
    try:
        try:
            os.write(fd, orjson.dumps({"kind": kind, "by": by}))
        finally:
            os.close(fd)
        os.link(draft, folder / f"{kind}.json")
    except FileExistsError:
        return False
    finally:
        with contextlib.suppress(OSError):
            os.unlink(draft)
    return True


def is_pending(run_dir: Path, kind: str) -> bool:
    return (run_dir / REQUESTS / f"{kind}.json").exists()


def withdraw(run_dir: Path, kind: str) -> bool:
    """The asker's end, when the run ended before taking its request: remove it; whether
    it was still there (never through a link planted in the record)."""
    folder = run_dir / REQUESTS
    if folder.is_symlink():
        return False
    try:
        (folder / f"{kind}.json").unlink()
    except OSError:
        return False
    return True


def discard_all(run_dir: Path) -> None:
    """The run's end: a request no longer taken by anyone is removed (an asker that posted
    it after the run's last look sees the run ended and says so: ``verbs``)."""
    for kind in KINDS:
        withdraw(run_dir, kind)


class Inbox:
    """The run's end: the requests folder as the run reads it."""

    def __init__(self, run_dir: Path) -> None:
        self.folder = run_dir / REQUESTS
        self._lock = threading.RLock()

    def take(self) -> list[Request]:
        """Consume every pending request (each is seen exactly once)."""
        taken: list[Request] = []
        if self.folder.is_symlink():
            return taken  # a link planted in the record: never read or delete through it
        with self._lock:
            for kind in KINDS:
                path = self.folder / f"{kind}.json"
                try:
                    raw = read_regular(path, 1 << 20)  # never a FIFO: the run would wait
                except OSError:
                    continue
                try:
                    data = orjson.loads(raw)
                except orjson.JSONDecodeError:
                    data = {}
                by = data.get("by") if isinstance(data, dict) else None
                taken.append(Request(kind, by if isinstance(by, dict) else {}))
                with contextlib.suppress(OSError):
                    path.unlink()
        return taken
