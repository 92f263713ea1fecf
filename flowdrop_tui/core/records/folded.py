"""A big record folded once: later reads fold only what was appended since.

``load_run`` folds a run's whole ``cycle.jsonl``. For a week-long fast loop that
is a record of hundreds of megabytes, read again by every ``flows`` and ``runs``
(a 183 MB record: 4–5 s and 1.35 GB each). For records over ``CACHE_MIN``, the
fold is kept in ``.flowdrop/cache/folds/<run-id>.json`` with the byte offset and
the file identity it covers; the next read restores it and folds only the lines
after that offset. It is a cache: anything that does not match the record (another
inode, a record cut shorter, a damaged file) is ignored and the record read whole.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import secrets
from pathlib import Path

import orjson

from flowdrop_tui.core.errors import FlowdropError, NotFoundError
from flowdrop_tui.core.files.regular import open_regular, read_regular
from flowdrop_tui.core.paths import CYCLE, Layout
from flowdrop_tui.core.records.budget import Used, clean_limits
from flowdrop_tui.core.records.event_lines import line_batches, parse_lines
from flowdrop_tui.core.records.progress import Streaks
from flowdrop_tui.core.records.run_fold import RunFold, derive_status
from flowdrop_tui.core.records.run_info import RunInfo, Status
from flowdrop_tui.core.records.usage import Usage

CACHE_MIN = 1 << 20  # smaller records are folded whole: faster than a cache file
# 3: budgets and drift (SPEC §14, §15); 4: usage-limit waits (§19); 5: progress streaks
# (§20); 6: gates (§21)
_VERSION = 6
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
}


def _cache_file(layout: Layout, run_id: str) -> Path:
    return layout.cache / "folds" / f"{run_id}.json"


def load_run(layout: Layout, run_id: str) -> RunInfo:
    """``run_fold.load_run``, folding only what a big record appended since it was last read."""
    path = layout.run_dir(run_id)
    if not path.is_dir():
        raise NotFoundError(f"no run {run_id} in {layout.runs}")
    return derive_status(fold_run(layout, run_id, path))


def fold_run(layout: Layout, run_id: str, path: Path) -> RunInfo:
    """The run's *recorded* fold (``run_fold.fold`` of its whole record), from the cache
    and the lines after it when the record is big."""
    run = RunFold(run_id, path)
    try:
        fd = open_regular(path / CYCLE)  # never a FIFO or a device
    except OSError:
        return run.feed([])
    try:
        stat = os.fstat(fd)
        identity = [stat.st_dev, stat.st_ino]
        offset = 0
        if stat.st_size >= CACHE_MIN:
            restored = _restore(layout, run_id, path, identity, stat.st_size)
            if restored is not None:
                run, offset = restored
        start = offset
        for lines, after in line_batches(fd, offset, stat.st_size):
            run.feed(parse_lines(lines))
            offset = after
        run.feed([])
    except OSError:
        return run.feed([])
    finally:
        os.close(fd)
    if stat.st_size >= CACHE_MIN and (start == 0 or offset - start >= CACHE_MIN):
        _save(layout, run_id, run, identity, offset)  # once, then every MiB it grows
    return run.info


def _restore(
    layout: Layout, run_id: str, path: Path, identity: list[int], size: int
) -> tuple[RunFold, int] | None:
    try:
        data = orjson.loads(read_regular(_cache_file(layout, run_id)))
        if not (
            isinstance(data, dict)
            and data.get("v") == _VERSION
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
    run = RunFold(run_id, path)
    run.info = info
    run.in_round_main = bool(data.get("in_round_main"))
    return run, int(data["offset"])


def _save(layout: Layout, run_id: str, run: RunFold, identity: list[int], offset: int) -> None:
    info = {f.name: getattr(run.info, f.name) for f in dataclasses.fields(run.info)}
    info.pop("path")
    info.pop("live_pid")
    info["streaks"] = run.info.streaks.to_record()
    info["chain_before"] = {
        key: usage.to_json() if usage is not None else None
        for key, usage in run.info.chain_before.items()
    }
    data = {
        "v": _VERSION,
        "identity": identity,
        "offset": offset,
        "in_round_main": run.in_round_main,
        "info": info,
    }
    target = _cache_file(layout, run_id)
    # A cache with many writers (every reader): each writes its own temporary file.
    tmp = target.with_name(f".{target.name}.{os.getpid()}-{secrets.token_hex(4)}.tmp")
    try:
        layout.folder(target.parent)  # never through a link
        # No `default`: a field holding objects this module does not convert (a future
        # RunInfo field) raises, and the fold is simply not kept.
        raw = orjson.dumps(data, option=orjson.OPT_NON_STR_KEYS | orjson.OPT_PASSTHROUGH_DATACLASS)
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        fd = os.open(tmp, flags, 0o644)
        try:
            os.write(fd, raw)
        finally:
            os.close(fd)
        os.replace(tmp, target)
    except (OSError, TypeError, FlowdropError):
        with contextlib.suppress(OSError):
            tmp.unlink()  # a read-only workspace, a full disk: read it whole next time
