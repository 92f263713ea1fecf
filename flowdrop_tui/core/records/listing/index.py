"""The workspace state index, ``.flowdrop/index.json`` (SPEC §8).

Per key: the last run that touched it, the run holding its latest state (the
pick-up source), that run's recorded status and the round counter. It makes
"what do I pick up" and the flow list cost the same whatever the number of runs.

It is a cache of the records. Every change is a read-modify-write under an
exclusive lock, written atomically. A run writes its index entry *before* its
record appears, so a kill in between leaves an index that points at a run that
is gone — which is what triggers a rebuild — and never a record the index does
not know. Readers repair what a kill can leave behind: an entry still saying
"running" for a run that has since ended or died is re-read from its record.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Callable, Iterable
from typing import Any

import orjson

from flowdrop_tui.core.errors import LinkRefusedError, UnusableStateError
from flowdrop_tui.core.files import locks
from flowdrop_tui.core.files.atomic import write_atomic
from flowdrop_tui.core.paths import CYCLE, Layout
from flowdrop_tui.core.records.flow_state import state_log
from flowdrop_tui.core.records.flow_state.state import run_state_bytes
from flowdrop_tui.core.records.listing import key_runs
from flowdrop_tui.core.records.listing.index_file import (  # the read side, and its names here
    GRAPH_FLOW as GRAPH_FLOW,
)
from flowdrop_tui.core.records.listing.index_file import INDEX_VERSION, STALE, Entry, Index, read
from flowdrop_tui.core.records.log.event_lines import events_named
from flowdrop_tui.core.records.run_record import trash
from flowdrop_tui.core.records.run_record.folder import is_abandoned
from flowdrop_tui.core.records.run_record.liveness import live_pid
from flowdrop_tui.core.records.run_record.run_fold import fold_run, list_run_ids
from flowdrop_tui.core.records.run_record.run_info import LIVE, TERMINAL, RunInfo, Status

# How long a writer waits for the index lock before it carries on without the index
# (a holder stopped with Ctrl-Z would otherwise block every run start and end for
# good), and how long a reader waits to rebuild it before answering from the records.
WRITE_WAIT = 5.0
READ_WAIT = 1.0


def _empty() -> Index:
    return {"v": INDEX_VERSION, "keys": {}}


def _entries(keys: dict[str, Any], key: str | None) -> Iterable[Any]:
    """Every entry, or only ``key``'s (none when it has no entry)."""
    return keys.values() if key is None else [keys[key]] if key in keys else []


def invalidate(layout: Layout) -> None:
    """Say the index is behind the records: a writer could not take the lock.

    The mark is removed only by a holder of the lock, *before* it rescans the
    records, so a change made before the mark is always seen by a later rescan, and
    one made after it leaves the mark in place (``_rescan_locked``)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
    with contextlib.suppress(OSError):
        os.close(os.open(layout.root / STALE, flags, 0o644))


def _rescan_locked(layout: Layout) -> Index:
    try:
        (layout.root / STALE).unlink()
    except FileNotFoundError:
        return _scan(layout)
    # Marked behind: a run was made without the lock, so without its line in its
    # key's run list either (key_runs); those lists are made again too.
    data = _scan(layout)
    with contextlib.suppress(OSError):
        key_runs.rebuild_locked(layout)
    return data


def _write(layout: Layout, data: Index) -> None:
    write_atomic(layout.index, orjson.dumps(data, option=orjson.OPT_INDENT_2))


def _state_keys(layout: Layout, run_id: str) -> set[str] | None:
    """Keys the run's ``state.json`` holds; ``None`` when it cannot be read."""
    try:
        data = orjson.loads(run_state_bytes(layout.runs / run_id))
    except (OSError, UnusableStateError, orjson.JSONDecodeError):
        return None
    return set(data) if isinstance(data, dict) else None


def new_entry(run_id: str, status: Status, round_: int, flow: str | None) -> Entry:
    """A key's entry when ``run_id`` is its last run and holds its latest state."""
    return {
        "last_run": run_id,
        "source": run_id,
        "status": str(status),
        "round": round_,
        "flow": flow,
    }


def entry_for(info: RunInfo, key: str, flow: str | None) -> Entry:
    return new_entry(info.run, info.recorded, info.key_rounds.get(key, info.first_round - 1), flow)


Order = tuple[str, int, str]


def _chain_order(runs: dict[str, tuple[str, str | None]]) -> dict[str, Order]:
    """Each run of one key (``run -> (start time, source run)``), ordered along its
    pick-up chain: a run comes after the run it picked up from, whatever the clocks
    said (a clock stepped back had a rebuild pick an older run up); time orders only
    what the links leave open (separate chains, two runs picked up from one)."""
    order: dict[str, Order] = {}
    for start in runs:
        path: list[str] = []
        on_path: set[str] = set()
        run: str | None = start
        while run is not None and run in runs and run not in order and run not in on_path:
            path.append(run)
            on_path.add(run)
            run = runs[run][1]
        base = order.get(run) if run is not None else None  # None: the chain starts here
        for run in reversed(path):
            t = runs[run][0]
            base = (t, 0, run) if base is None or t > base[0] else (base[0], base[1] + 1, run)
            order[run] = base
    return order


def _scan(layout: Layout) -> Index:
    """The index as the records say it should be."""
    runs: dict[str, dict[str, tuple[str, str | None]]] = {}  # key -> run -> (t, source)
    facts: dict[tuple[str, str], tuple[RunInfo, str | None, bool]] = {}
    for run_id in list_run_ids(layout):
        run_dir = layout.runs / run_id
        info = fold_run(layout, run_id, run_dir)  # streamed; a big record from its cached fold
        if not info.has_created or info.key is None:
            continue  # a half-made or foreign folder: not a run
        source = info.source if isinstance(info.source, str) else None
        begins: list[tuple[str, str, str | None, str | None]] = [
            (info.key, info.started or "", info.flow, source)
        ]
        calls = events_named(run_dir / CYCLE, "call_started") if info.called else iter(())
        for ev in calls:
            if isinstance(ev.get("key"), str):
                called_source = ev.get("source")
                begins.append(
                    (
                        ev["key"],
                        str(ev.get("t", "")),
                        ev.get("flow"),
                        called_source if isinstance(called_source, str) else None,
                    )
                )
        held = _state_keys(layout, run_id)
        for key, t, flow, from_run in begins:
            if (key, run_id) in facts:
                continue  # a key called twice in one run: its first start places it
            runs.setdefault(key, {})[run_id] = (t, from_run)
            # A record whose state cannot be read still counts as holding its keys:
            # picking up must then refuse naming that file (INT-15), not look past it.
            facts[(key, run_id)] = (info, flow, held is None or key in held)
    data = _empty()
    for key, of_key in runs.items():
        order = _chain_order(of_key)
        last = max(of_key, key=order.__getitem__)
        info, flow, _ = facts[(key, last)]
        entry = entry_for(info, key, flow)
        holding = [run for run in of_key if facts[(key, run)][2]]
        entry["source"] = max(holding, key=order.__getitem__) if holding else None
        data["keys"][key] = entry
    return data


def _sweep_half_made(layout: Layout) -> None:
    """Remove record folders a kill left half-made (``runs/.new-<id>``). Call under the lock.

    A record is built in ``.new-<id>`` by a creator holding the index lock, and renamed
    into place before it lets go; so one seen by a holder of the lock, whose
    ``live.lock`` nobody holds, is a creation that was killed — never a record.
    """
    layout.inside(layout.runs)  # a link at runs/: not ours to delete in
    try:
        names = os.listdir(layout.runs)
    except OSError:
        return
    for name in names:
        if is_abandoned(layout, name):
            shutil.rmtree(layout.runs / name, ignore_errors=True)


def rebuild(layout: Layout, *, strict: bool = False) -> Index:
    """Rebuild the index from the records (``flowdrop-tui reindex``: ``strict``, which
    reports a lock held too long; otherwise the records' answer is returned anyway)."""
    layout.ensure()
    try:
        with locks.exclusive(layout.index_lock, wait=WRITE_WAIT):
            _sweep_half_made(layout)
            for run_id in list_run_ids(layout):  # logs a kill or a power cut left
                state_log.settle(layout.runs / run_id)
            data = _rescan_locked(layout)
            _write(layout, data)
            key_runs.rebuild_locked(layout)
        try:
            trash.sweep(layout)  # finish what a killed prune left (invisible to readers)
        except LinkRefusedError:
            if strict:  # `reindex` says so (a run need not: the trash is prune's)
                raise
    except locks.LockTimeout:
        if strict:
            raise
        return _scan(layout)
    return data


def update_locked(layout: Layout, change: Callable[[dict[str, Entry]], None]) -> None:
    """``update`` for a caller that already holds the index lock."""
    data = read(layout)
    if data is None:
        data = _rescan_locked(layout)
    change(data["keys"])
    try:
        _write(layout, data)
    except OSError:
        # A cache that cannot be kept exact is better gone than trusted: without it,
        # the next reader rebuilds from the records (or answers from them, read-only).
        with contextlib.suppress(OSError):
            layout.index.unlink()
        raise


def update(layout: Layout, change: Callable[[dict[str, Entry]], None]) -> None:
    """Apply ``change`` to the keys under the lock; rebuild first if the index is unusable."""
    layout.ensure()
    try:
        with locks.exclusive(layout.index_lock, wait=WRITE_WAIT):
            update_locked(layout, change)
    except locks.LockTimeout:
        invalidate(layout)  # carried on without it: readers rebuild once the lock is free
        raise


def set_entries(layout: Layout, entries: Iterable[tuple[str, Entry]]) -> None:
    def change(keys: dict[str, Entry]) -> None:
        for key, entry in entries:
            keys[key] = entry

    update(layout, change)


def record_status(layout: Layout, info: RunInfo, keys: Iterable[str]) -> None:
    """After a run changes status (ends, pauses, resumes): refresh the keys it last touched."""

    def change(entries: dict[str, Entry]) -> None:
        for key in keys:
            entry = entries.get(key)
            if entry is not None and entry.get("last_run") == info.run:
                entry["status"] = str(info.recorded)
                entry["round"] = info.key_rounds.get(key, entry.get("round", 0))

    update(layout, change)


def _stale(layout: Layout, data: Index, key: str | None = None) -> bool:
    """Whether an entry (only ``key``'s, when given) names a run whose record is gone."""
    for entry in _entries(data["keys"], key):
        for field in ("last_run", "source"):
            run_id = entry.get(field)
            if isinstance(run_id, str) and not (layout.runs / run_id / CYCLE).is_file():
                return True
    return False


def load(layout: Layout, key: str | None = None) -> Index:
    """The index, rebuilt when missing, unreadable or pointing at a run that is gone.

    With ``key``, only that key's entry is checked (use the answer for that key
    only): a lookup then costs two ``stat`` calls, not two per key in the
    workspace (bench/resolve.py: checking every entry made picking up grow with
    the workspace).
    """
    data = read(layout)
    if data is not None and not _stale(layout, data, key):
        return data
    if not layout.root.is_dir():
        return _empty()
    try:
        with locks.exclusive(layout.index_lock, wait=READ_WAIT):
            # A run being created holds this lock while its entry is ahead of its
            # record; once we have the lock, look again before rebuilding.
            data = read(layout)
            if data is not None and not _stale(layout, data, key):
                return data
            _sweep_half_made(layout)  # a kill during creation is what leaves the index stale
            data = _rescan_locked(layout)
            _write(layout, data)
            return data
    except OSError:
        # A read-only workspace, or the lock held past READ_WAIT: answer from the records.
        return _scan(layout)


def lookup(layout: Layout, key: str) -> Entry | None:
    """The index entry for ``key``, checked against the records it names.

    The cost depends on the key's own last run, never on how many runs exist.
    """
    data = load(layout, key)
    entry = data["keys"].get(key)
    if entry is None:
        return None
    if entry.get("status") not in {str(s) for s in TERMINAL}:
        repaired = repair(layout, key, entry)
        if repaired is not None:
            entry = repaired
    return dict(entry)


def key_runs_caught_up(layout: Layout, key: str) -> None:
    """Before a key's runs are listed: its run list rebuilt if it is behind the index's
    last run of the key (``key_runs.catch_up``). One read of ``index.json`` as it is."""
    data = read(layout)
    entry = data["keys"].get(key) if data is not None else None
    if entry is not None:
        key_runs.catch_up(layout, key, entry["last_run"])


def repair(layout: Layout, key: str, entry: Entry) -> Entry | None:
    """An entry still saying live or paused may be behind its record (killed mid-update)."""
    run_id = entry["last_run"]
    run_dir = layout.runs / run_id
    info = fold_run(layout, run_id, run_dir)  # a big record: only what it appended
    status = str(info.recorded)
    round_ = info.key_rounds.get(key, entry.get("round", 0))
    if status == entry.get("status") and round_ == entry.get("round"):
        return None
    fixed = {**entry, "status": status, "round": round_}
    if info.recorded in LIVE and live_pid(run_dir) is not None:
        return fixed  # live: the round moves on; not worth a write per read
    # Ended, paused, or dead (interrupted): the record no longer moves, so the repair is
    # written once, under the index lock, instead of recomputed by every reader.
    with contextlib.suppress(OSError):
        set_entries(layout, [(key, fixed)])
    return fixed
