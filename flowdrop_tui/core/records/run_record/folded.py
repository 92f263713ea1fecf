"""A big record's fold kept on disk: later reads fold only what was appended since.

``run_fold.fold_run`` folds a run's ``cycle.jsonl`` a chunk at a time. For a
week-long fast loop that is a record of hundreds of megabytes, read again by every
``flows``, ``runs``, ``show``, ``plan`` and the run's own end (a 1 GB record: about
20 s each). For records over ``CACHE_MIN``, the fold is kept in
``.flowdrop/cache/folds/<run-id>.json`` with the byte offset and the file identity it
covers (``save``); the next read restores it (``restore``) and folds only the lines
after that offset. It is a cache: anything that does not match the record (another
inode, a record cut shorter, a damaged file, another version, a link, a FIFO) is
ignored and the record read whole — and the cache written again.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import secrets
import stat
from pathlib import Path
from typing import Any

import orjson

from flowdrop_tui.core.errors import FlowdropError
from flowdrop_tui.core.files.atomic import open_fd
from flowdrop_tui.core.files.regular import SMALL_FILE
from flowdrop_tui.core.paths import Layout
from flowdrop_tui.core.records.run_record.run_info import RunInfo, Status
from flowdrop_tui.core.records.spend.budget import Used, clean_limits
from flowdrop_tui.core.records.spend.progress import Streaks
from flowdrop_tui.core.records.spend.usage import Usage

CACHE_MIN = 1 << 20  # smaller records are folded whole: faster than a cache file
# 3: budgets and drift (SPEC §14, §15); 4: usage-limit waits (§19); 5: progress streaks
# (§20); 6: gates (§21); 7: the first that is ever written (budget_carried made 1–6 fail);
# 8: the streaks end with a completed run and skip rounds with no agent session (§20);
# 9: an answer kept with its gate's tie, the round a question makes run again (§21)
VERSION = 9
# RunInfo fields a cached fold must hold with these types (anything else: not trusted)
_SHAPES: dict[str, type | tuple[type, ...]] = {
    "position": dict,
    "carried": dict,
    "key_rounds": dict,
    "called": list,
    "warnings": list,
    "sessions": list,
    "rounds": int,
    "first_round": int,
    "events": int,
    "chain_before": dict,
    "gates": dict,
    "gate_answers": list,
    "holders": list,
    "state_refused": dict,
}
# Fields turned into JSON their own way (``save``) and back (``restore``); every other
# field of ``RunInfo`` is plain JSON. A new field that is not (a dataclass, a path)
# fails ``save`` loudly in the tests (tests/core/test_giant_records.py).
_NOT_KEPT = ("path", "live_pid")


class Restored:
    """A fold read back from the cache: the run so far, up to ``offset``."""

    def __init__(self, info: RunInfo, in_round_main: bool, offset: int) -> None:
        self.info = info
        self.in_round_main = in_round_main
        self.offset = offset


def cache_file(layout: Layout, run_id: str) -> Path:
    return layout.cache / "folds" / f"{run_id}.json"


def restore(
    layout: Layout, run_id: str, path: Path, identity: list[int], size: int
) -> Restored | None:
    """The cached fold of the record whose ``(st_dev, st_ino)`` is ``identity`` and whose
    size is now ``size``; ``None`` when there is none that can be trusted."""
    try:
        data = orjson.loads(_read(cache_file(layout, run_id)))
        if not (
            isinstance(data, dict)
            and data.get("v") == VERSION
            and data.get("identity") == identity
            and type(data.get("offset")) is int
            and 0 < data["offset"] <= size
            and isinstance(data.get("info"), dict)
        ):
            return None
        fields = dict(data["info"])
        for name, kind in _SHAPES.items():
            if not isinstance(fields.get(name), kind):
                return None
        fields.update(
            run=run_id,
            path=path,
            recorded=Status(fields["recorded"]),
            status=Status(fields["status"]),
            chain_before={k: Usage.from_json(v) for k, v in fields["chain_before"].items()},
            budget_carried=Used.from_record(fields.get("budget_carried")),
            budget_limits=clean_limits(fields.get("budget_limits")),
            budget_overrides=clean_limits(fields.get("budget_overrides")),
            streaks=Streaks.from_record(fields.get("streaks")),
        )
        info = RunInfo(**fields)
    except (OSError, orjson.JSONDecodeError, KeyError, TypeError, ValueError):
        return None
    return Restored(info, bool(data.get("in_round_main")), int(data["offset"]))


def _read(target: Path) -> bytes:
    """The cache file: a regular file, never through a link (in its place or its
    folder's), never more than ``SMALL_FILE``."""
    if os.path.islink(target.parent):
        raise OSError(f"{target.parent} is a link")
    fd = open_fd(target, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > SMALL_FILE:
            raise OSError(f"{target} is not a cache file")
        chunks = []
        while data := os.read(fd, 1 << 20):
            chunks.append(data)
        return b"".join(chunks)
    finally:
        os.close(fd)


def encode(info: RunInfo, in_round_main: bool, identity: list[int], offset: int) -> bytes:
    """The cache file's bytes for ``info`` folded up to ``offset``; ``TypeError`` for a
    field this module does not turn into JSON (no ``default``: never a wrong cache)."""
    fields: dict[str, Any] = {
        f.name: getattr(info, f.name) for f in dataclasses.fields(info) if f.name not in _NOT_KEPT
    }
    fields["streaks"] = info.streaks.to_record()
    fields["budget_carried"] = info.budget_carried.to_record()
    fields["chain_before"] = {
        key: usage.to_json() if usage is not None else None
        for key, usage in info.chain_before.items()
    }
    data = {
        "v": VERSION,
        "identity": identity,
        "offset": offset,
        "in_round_main": in_round_main,
        "info": fields,
    }
    return orjson.dumps(data, option=orjson.OPT_NON_STR_KEYS | orjson.OPT_PASSTHROUGH_DATACLASS)


def save(layout: Layout, run_id: str, raw: bytes) -> None:
    """Keep ``raw`` (``encode``) as the run's cached fold; a failure only means the next
    read folds the record from its start."""
    target = cache_file(layout, run_id)
    # A cache with many writers (every reader): each writes its own temporary file.
    tmp = target.with_name(f".{target.name}.{os.getpid()}-{secrets.token_hex(4)}.tmp")
    try:
        layout.folder(target.parent)  # never through a link
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        fd = os.open(tmp, flags, 0o644)
        try:
            view = memoryview(raw)
            while view:
                view = view[os.write(fd, view) :]
        finally:
            os.close(fd)
        os.replace(tmp, target)  # a link, FIFO or junk in its place is replaced, never followed
    except (OSError, FlowdropError):
        with contextlib.suppress(OSError):
            tmp.unlink()  # a read-only workspace, a full disk: read it whole next time
