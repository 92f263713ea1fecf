"""Making a run's record, and the one-live-run-per-key lock it starts under.

Order of creation (under the index lock): the index entry first, then the
record built in a hidden folder and renamed into place. A kill before the
rename leaves an index pointing at a run that is gone, which triggers a
rebuild; no kill can leave a record the index silently misses. The run's
process holds its ``live.lock`` from before the record appears until it ends,
and its key's lock for as long as it runs that key.
"""

from __future__ import annotations

import os
import shutil
import socket
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from flowdrop_tui.core import git
from flowdrop_tui.core.errors import AlreadyRunningError
from flowdrop_tui.core.files import locks
from flowdrop_tui.core.files.atomic import full_sync, sync_dir, sync_entry, write_atomic
from flowdrop_tui.core.flows.declaration import LoadedFlow
from flowdrop_tui.core.flows.discovery import FlowRef
from flowdrop_tui.core.paths import (
    CYCLE,
    LIVE_LOCK,
    OUTPUT,
    REQUESTS,
    RUN_ID_RE,
    SESSIONS,
    STATE,
    Layout,
    split_lane,
)
from flowdrop_tui.core.records import mirror
from flowdrop_tui.core.records.flow_state.state import encode
from flowdrop_tui.core.records.listing import index, key_runs
from flowdrop_tui.core.records.log.event_log import RECORD_VERSION, EventLog
from flowdrop_tui.core.records.run_record.folder import hidden_folder, unwritable
from flowdrop_tui.core.records.run_record.run_info import Status
from flowdrop_tui.core.records.run_record.spending import chain_usage_field
from flowdrop_tui.core.run.start_plan import StartPlan


def take_key(layout: Layout, key: str, run_id: str) -> Path:
    """Hold ``key``'s lock for ``run_id``; refuse, naming the live run, when it is taken."""
    path = layout.key_lock(key)
    try:
        full_sync(locks.acquire(path, content=run_id))
        sync_dir(layout.keys)  # the lock file whole before its name (see sync_entry)
    except OSError as exc:
        raise unwritable(path, exc) from exc
    except locks.LockHeld:
        raise key_taken(layout, key) from None
    return path


def key_taken(layout: Layout, key: str) -> AlreadyRunningError:
    """The refusal for a key another live run holds, naming that run."""
    path = layout.key_lock(key)
    holder = ""
    for _ in range(20):  # the holder writes its run id right after locking
        holder = locks.read_content(path)
        if RUN_ID_RE.match(holder) and (layout.runs / holder).is_dir():
            break
        time.sleep(0.05)
    if not RUN_ID_RE.match(holder):
        holder = ""  # read from a file: named only when it is a run id, never a path
    named = f"run {holder}" if holder else "another run"
    per = "key" if split_lane(key)[1] is not None else "flow"  # a lane is one of its flow's keys
    return AlreadyRunningError(
        f"{key} is already running ({named}); one live run per {per} — "
        f"stop it with: flowdrop-tui stop {holder or 'RUN'}"
    )


def key_is_taken(layout: Layout, key: str) -> bool:
    """Whether a live run holds ``key`` (read without taking it: ``plan``)."""
    return locks.holder_pid(layout.key_lock(key)) is not None


def created_event(
    layout: Layout,
    run_id: str,
    ref: FlowRef,
    loaded: LoadedFlow,
    plan_: StartPlan,
    foresight: dict[str, Any],
) -> dict[str, Any]:
    """The ``created`` event; ``foresight``: what the forecast found (``git`` now, the
    ``flow_digest`` a pick-up compares with, the ``budget`` limits and chain count)."""
    event: dict[str, Any] = {
        "v": RECORD_VERSION,
        "run": run_id,
        "key": ref.key,
        "flow": ref.rel(layout),
        "start": plan_.start,
        "source": plan_.source,
        "source_status": plan_.source_status,
        "snapshot": plan_.snapshot_file,
        "first_round": plan_.first_round,
        # What the chain spent before this run (SPEC §14): a thread's usage, and its
        # token budget, are then read from its last run alone.
        "chain_usage": chain_usage_field(layout, ref.key, plan_.source),
        "resumable": loaded.declaration.resumable,
        "pid": os.getpid(),
        "pgid": os.getpgrp(),
        "host": socket.gethostname(),
        "git": git.facts(layout.checkout),
        **foresight,
    }
    if plan_.position is not None:
        event["position"] = plan_.position
    if plan_.carried:
        event["carried"] = plan_.carried
    if plan_.replaced is not None:
        event["replaced"] = plan_.replaced  # the head an unresolved --resume looked past
    return event


def create_record(
    layout: Layout,
    run_id: str,
    key: str,
    created: dict[str, Any],
    state: dict[str, Any],
    on_warning: Callable[[str], None] | None = None,
) -> EventLog:
    """Make the run's record, its index entry first (under the index lock).

    When the lock is held past ``index.WRITE_WAIT`` (its holder stopped with Ctrl-Z),
    the record is made without the index, which is marked behind the records
    (``index.invalidate``): it is a cache, and a stopped process must not stop runs."""
    try:
        with locks.exclusive(layout.index_lock, wait=index.WRITE_WAIT):
            return _create(layout, run_id, key, created, state, with_index=True)
    except locks.LockTimeout as exc:
        log = _create(layout, run_id, key, created, state, with_index=False)
        index.invalidate(layout)
        message = f"the index was not updated: {exc}; it is rebuilt when the lock is free"
        log.append("warning", kind="index", message=message)
        if on_warning is not None:
            on_warning(message)
        return log


def _create(
    layout: Layout,
    run_id: str,
    key: str,
    created: dict[str, Any],
    state: dict[str, Any],
    *,
    with_index: bool,
) -> EventLog:
    final = layout.runs / run_id
    hidden = hidden_folder(layout, run_id)
    previous: dict[str, Any] = {}

    def point_at_new_run(keys: dict[str, Any]) -> None:
        previous.update(keys.get(key) or {})
        keys[key] = index.new_entry(
            run_id, Status.PENDING, created["first_round"] - 1, created["flow"]
        )

    if with_index:
        index.update_locked(layout, point_at_new_run)
        key_runs.append_locked(layout, key, run_id)  # before the record, as the entry
    log: EventLog | None = None
    try:
        hidden.mkdir()
        (hidden / SESSIONS).mkdir()
        (hidden / REQUESTS).mkdir()
        # Each sub-folder whole before its name: the next sync of ``hidden`` (write_atomic's)
        # makes the names durable, and on ext2 a name durable before its folder's block
        # came back naming a block of old text that e2fsck could not repair.
        for entry in (SESSIONS, REQUESTS):
            sync_entry(hidden / entry)
        # Synced through the descriptor that holds the lock: closing any other
        # descriptor of a locked file would drop the lock (files/locks.py).
        full_sync(locks.acquire(hidden / LIVE_LOCK, content=str(os.getpid())))
        write_atomic(hidden / STATE, encode({key: state}))
        log = EventLog(hidden / CYCLE)
        # Durable before the run exists: a full disk or an I/O error here refuses
        # the run (it was published and run with no record of its creation), and
        # a power cut after a run was reported started never loses its record.
        log.commit("created", **created)
        (hidden / OUTPUT).touch()
        sync_entry(hidden / OUTPUT)  # whole before its name (see sync_entry)
        sync_dir(hidden)
        os.rename(hidden, final)
        for folder in (layout.runs, layout.root, layout.workspace):
            sync_dir(folder)  # the run's name, and .flowdrop/ itself the first time
        locks.rekey(hidden / LIVE_LOCK, final / LIVE_LOCK)
        log.path = final / CYCLE
    except BaseException:
        if log is not None:
            log.close()
        locks.release(hidden / LIVE_LOCK)
        shutil.rmtree(hidden, ignore_errors=True)

        def restore(keys: dict[str, Any]) -> None:
            if previous:
                keys[key] = previous
            else:
                keys.pop(key, None)

        if with_index:
            try:
                index.update_locked(layout, restore)
            except OSError:
                pass  # the entry points at a run that is gone: the next reader rebuilds
        raise
    remote = mirror.current()
    if remote is not None:  # the record exists: its mirror gets it whole
        remote.published(final)
    return log
