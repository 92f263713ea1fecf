"""Open a run for this process to execute: a new one, or a paused one continuing.

``open_run`` does everything before a flow runs — load it, take its key,
resolve where it starts (SG-12/INT-14), create its record — so that every
refusal happens before any run exists. ``reopen_paused`` continues a paused
run in its own record; (``control.verbs.close_paused`` ends one without running it.)
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from flowdrop_tui.core.control.verbs import check_resumable
from flowdrop_tui.core.errors import AlreadyRunningError, RecordsUnwritableError
from flowdrop_tui.core.files import locks
from flowdrop_tui.core.flows.declaration import LoadedFlow, load_flow
from flowdrop_tui.core.flows.discovery import FlowRef, resolve_flow
from flowdrop_tui.core.paths import CYCLE, LIVE_LOCK, STATE, Layout, new_run_id
from flowdrop_tui.core.records.events import EventLog, who
from flowdrop_tui.core.records.folder import refuse_links, unwritable
from flowdrop_tui.core.records.state import StateFile, read_states
from flowdrop_tui.core.run.creation import create_record, created_event, take_key
from flowdrop_tui.core.run.execution import Execution, Notify, quiet
from flowdrop_tui.core.run.frame import Frame
from flowdrop_tui.core.run.plan import plan


def open_run(
    layout: Layout,
    ref: FlowRef,
    *,
    snapshot: Path | None = None,
    resume: str | None = None,
    from_run: str | None = None,
    fresh: bool = False,
    by: dict[str, Any] | None = None,
    notify: Notify = quiet,
) -> Execution:
    """Everything before a run executes: load the flow, take its key, resolve its start,
    create its record (or reopen the paused run SG-12 says continues). Refusals raise
    before any run exists."""
    layout.check_writable()
    loaded = load_flow(ref.file, layout.workspace)
    run_id = new_run_id()
    key_lock = take_key(layout, ref.key, run_id)
    try:
        start_plan = plan(
            layout,
            ref.key,
            resumable=loaded.declaration.resumable,
            snapshot=snapshot,
            resume=resume,
            from_run=from_run,
            fresh=fresh,
        )
        for warning in start_plan.warnings:
            notify(f"warning: {warning}")
        if start_plan.resume is not None:
            locks.write_content(key_lock, start_plan.resume)
            return _reopen(layout, start_plan.resume, by, notify, key_lock, loaded)
        created = created_event(layout, run_id, ref, loaded, start_plan)
        try:
            log = create_record(
                layout,
                run_id,
                ref.key,
                created,
                start_plan.state,
                on_warning=lambda message: notify(f"warning: {message}"),
            )
        except OSError as exc:
            raise RecordsUnwritableError(
                f"could not create the run's record under {layout.runs}: "
                f"{exc.strerror or exc}" + (f" ({exc.filename})" if exc.filename else "")
            ) from exc
        for warning in start_plan.warnings:
            log.append("warning", kind="start", message=warning)
        states = StateFile(layout.runs / run_id / STATE)
        states.adopt({ref.key: start_plan.state})
        frame = Frame(
            key=ref.key,
            flow=created["flow"],
            state=states.state(ref.key),
            first_round=start_plan.first_round,
            round=start_plan.first_round - 1,
            restore=start_plan.position,
        )
        if start_plan.position is not None:
            frame.finished = start_plan.position.get("iterationCount") or 0
            frame.iterator = start_plan.position.get("iterator")
        return Execution(
            layout, run_id, loaded, log, states, frame, [key_lock], notify, resumed_by=None
        )
    except BaseException:
        locks.release(key_lock)
        raise


def reopen_paused(
    layout: Layout, run_id: str, *, by: dict[str, Any] | None = None, notify: Notify = quiet
) -> Execution:
    """``resume RUN``: the paused run continues in its own record (SG-12 clause 3)."""
    info = check_resumable(layout, run_id)
    layout.check_writable()
    assert info.key is not None
    key_lock = take_key(layout, info.key, run_id)
    try:
        return _reopen(layout, run_id, by, notify, key_lock, None)
    except BaseException:
        locks.release(key_lock)
        raise


def _reopen(
    layout: Layout,
    run_id: str,
    by: dict[str, Any] | None,
    notify: Notify,
    key_lock: Path,
    loaded: LoadedFlow | None,
) -> Execution:
    run_dir = layout.run_dir(run_id)
    refuse_links(run_dir)
    try:
        locks.acquire(run_dir / LIVE_LOCK, content=str(os.getpid()))
    except locks.LockHeld:
        raise AlreadyRunningError(f"run {run_id} is being resumed by another process") from None
    except OSError as exc:
        raise unwritable(run_dir / LIVE_LOCK, exc) from exc
    try:
        info = check_resumable(layout, run_id)  # again, now that we hold it
        assert info.key is not None
        ref = flow_of_key(layout, info.key)
        if loaded is None:
            loaded = load_flow(ref.file, layout.workspace)
        states = StateFile(run_dir / STATE)
        states.adopt(read_states(run_dir / STATE))
        main = states.state(info.key)
        frame = Frame(
            key=info.key,
            flow=info.flow or ref.rel(layout),
            state=main,
            first_round=info.first_round,
            round=info.key_rounds.get(info.key, info.first_round - 1),
            restore=dict(info.position),
            finished=info.position["iterationCount"],
            iterator=info.position["iterator"],
        )
        try:
            log = EventLog(run_dir / CYCLE)
        except OSError as exc:
            raise unwritable(run_dir / CYCLE, exc) from exc
        by = {**who(), **(by or {})}
        return Execution(
            layout, run_id, loaded, log, states, frame, [key_lock], notify, resumed_by=by
        )
    except BaseException:
        locks.release(run_dir / LIVE_LOCK)
        raise


def flow_of_key(layout: Layout, key: str) -> FlowRef:
    """The flow a paused run of ``key`` continues with: the one its key names today, as
    ``run KEY`` would load it — never a path read from the record, so a damaged or
    forged ``flow`` field cannot make a resume import code from somewhere else."""
    return resolve_flow(layout, key, cwd=layout.workspace)
