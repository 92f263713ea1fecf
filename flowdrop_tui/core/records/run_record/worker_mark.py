"""Which worker runs or ran a run (remote mode): ``remote-worker.json`` in a replica's
run folder, written by the replica's sync from PostgreSQL's ``fd_runs`` and kept once
the run has ended (``remote-live.json`` goes then), so ``runs`` and ``show`` name the
worker of a run that is over too. Local mode writes none: no name is shown there.

Both ends are here: ``mark`` (the sync) and ``worker_of`` (the readers)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import orjson

from flowdrop_tui.core.files.atomic import write_atomic

WORKER_MARK = "remote-worker.json"
VERSION = 1
_MAX = 4096  # bytes: a marker is a few dozen; anything bigger is not one the sync wrote


def mark(run_dir: Path, worker: Any, host: Any) -> None:
    """Note the worker (and its host) PostgreSQL says holds or held the run."""
    if not isinstance(worker, str) or not worker:
        return
    data = {"v": VERSION, "worker": worker, "host": host if isinstance(host, str) else None}
    if worker_of(run_dir) == _words(data):
        return  # unchanged: no write on every sync
    write_atomic(run_dir / WORKER_MARK, orjson.dumps(data), durable=False)


def worker_of(run_dir: Path) -> str | None:
    """``w1 on host-a`` (the worker's id, and its host when it differs), or None."""
    try:
        fd = os.open(run_dir / WORKER_MARK, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        data = orjson.loads(os.read(fd, _MAX))
    except (OSError, orjson.JSONDecodeError):
        return None
    finally:
        os.close(fd)
    if not isinstance(data, dict) or data.get("v") != VERSION:
        return None
    return _words(data)


def _words(data: dict[str, Any]) -> str | None:
    worker, host = data.get("worker"), data.get("host")
    if not isinstance(worker, str) or not worker:
        return None
    return worker if not isinstance(host, str) or host in ("", worker) else f"{worker} on {host}"
