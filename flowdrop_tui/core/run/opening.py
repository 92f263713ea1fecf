"""Open a run for this process to execute: a new one, or a paused one continuing.

``open_run`` does everything before a flow runs — load it, take its key,
resolve where it starts (SG-12/INT-14), create its record — so that every
refusal happens before any run exists. ``reopen_paused`` continues a paused
run in its own record; (``control.verbs.close_paused`` ends one without running it.)
"""

from __future__ import annotations

import os
import stat
from dataclasses import replace
from pathlib import Path
from typing import Any

from flowdrop_tui.core.control.gates import still_open
from flowdrop_tui.core.control.verbs import check_resumable
from flowdrop_tui.core.errors import (
    AlreadyRunningError,
    LinkRefusedError,
    RecordsUnwritableError,
)
from flowdrop_tui.core.files import locks
from flowdrop_tui.core.flows.declaration import LoadedFlow, load_flow
from flowdrop_tui.core.flows.discovery import FlowRef, resolve_flow
from flowdrop_tui.core.lanes import lane_trees
from flowdrop_tui.core.lanes.known import lane_of
from flowdrop_tui.core.lanes.place import checked_out_here
from flowdrop_tui.core.paths import CYCLE, LIVE_LOCK, STATE, Layout, new_run_id, split_lane
from flowdrop_tui.core.records.flow_state.state import StateFile, read_run_states
from flowdrop_tui.core.records.log.event_log import EventLog, who
from flowdrop_tui.core.records.run_record.folder import refuse_links, unwritable
from flowdrop_tui.core.records.run_record.run_fold import answer_of
from flowdrop_tui.core.run.creation import create_record, created_event, take_key
from flowdrop_tui.core.run.execution import Execution, Notify, quiet
from flowdrop_tui.core.run.forecast import (
    Forecast,
    StartOptions,
    forecast_resume,
    forecast_start,
)
from flowdrop_tui.core.run.frame import Frame


def refuse_planted(layout: Layout) -> None:
    """Refuse before any run exists (or a paused one continues) when ``transcripts/``,
    where a run's sessions keep their transcripts, is a link or not a folder: the run
    would otherwise start and fail at its first session (the engine never writes
    through a link inside ``.flowdrop/``). A refusal, ``RECORDS_UNWRITABLE`` (exit 3),
    naming the path and where it leads (docs/decisions.md)."""
    path = layout.transcripts
    try:
        found = os.lstat(path)
    except FileNotFoundError:
        return  # made by the first session, without following anything
    except OSError as exc:
        raise RecordsUnwritableError(f"cannot look at {path}: {exc.strerror or exc}") from exc
    if stat.S_ISDIR(found.st_mode):
        return
    link = stat.S_ISLNK(found.st_mode)
    what = f"a link to {os.readlink(path)}" if link else "not a folder"
    raise LinkRefusedError(
        f"{path} is {what}; a run keeps its sessions' transcripts there and never writes "
        f"through a link inside .flowdrop/ — remove it (the engine makes its own folder) "
        "and run again; nothing was started"
    )


def open_run(
    layout: Layout,
    ref: FlowRef,
    *,
    options: StartOptions | None = None,
    by: dict[str, Any] | None = None,
    notify: Notify = quiet,
) -> Execution:
    """Everything before a run executes: load the flow, take its key, work out what the
    start would do (``forecast``: SG-12/INT-14, budgets, drift), create its record (or
    reopen the paused run SG-12 says continues). Refusals raise before any run exists."""
    options = options or StartOptions()
    layout.check_writable()
    refuse_planted(layout)
    loaded = load_flow(ref.file, layout.workspace)
    run_id = new_run_id()
    key_lock = take_key(layout, ref.key, run_id)
    try:
        found = forecast_start(
            layout,
            ref.key,
            ref.folder,
            resumable=loaded.declaration.resumable,
            declared=loaded.declaration.limits,
            options=options,
            holding_key=True,
        )
        if found.refusal is not None:
            raise found.refusal
        if found.resume is not None:
            for warning in found.start_warnings:
                notify(f"warning: {warning}")
            locks.write_content(key_lock, found.resume)
            return _reopen(layout, found.resume, by, notify, key_lock, loaded, options, None)
        for warning in found.warnings:
            notify(f"warning: {warning}")
        start_plan = found.plan
        assert start_plan is not None
        foresight = {
            "flow_digest": found.flow_digest,  # SPEC §15: what a later pick-up compares with
            "budget": found.budget_record(new_run=True),  # SPEC §14: limits, the chain's count
        }
        if found.git_now is not None:
            foresight["git"] = found.git_now
        if found.source is not None and found.source.key == ref.key:
            # SPEC §20: a pick-up (after a kill too) carries the chain's streaks on
            foresight["progress"] = found.source.streaks.to_record()
        lane = lane_trees.lane_for(layout, ref.key) if split_lane(ref.key)[1] else None
        if lane is not None:  # recorded before its branch or worktree exists (SPEC §23)
            foresight["lane"] = lane.to_record()
            if not lane.path.exists() and not checked_out_here(lane):
                # its git at the start is the branch it will be made on, never the
                # workspace's: a round in flight is diffed against it (round_diff)
                foresight["git"] = {"head": lane.base, "branch": lane.branch, "dirty": False}
        created = created_event(layout, run_id, ref, loaded, start_plan, foresight)
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
        _record_warnings(log, found)
        if lane is not None and not checked_out_here(lane):  # a worker's is the lane's
            # made as it executes: a failure there ends this run failed
            layout = replace(layout, tree=lane.path)
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
            layout,
            run_id,
            loaded,
            log,
            states,
            frame,
            [key_lock],
            notify,
            resumed_by=None,
            limit_wait=options.limit_wait,
            lane=lane,
        )
    except BaseException:
        locks.release(key_lock)
        raise


def _record_warnings(log: EventLog, found: Forecast) -> None:
    """Every warning of the start goes in the run's record (SPEC §4, §15)."""
    for warning in found.start_warnings:
        log.append("warning", kind="start", message=warning)
    if found.drift is not None and found.drift.drifted:
        for warning in found.drift.messages():
            log.append("warning", kind="drift", message=warning, drift=found.drift.to_json())


def reopen_paused(
    layout: Layout,
    run_id: str,
    *,
    options: StartOptions | None = None,
    by: dict[str, Any] | None = None,
    notify: Notify = quiet,
    answer: dict[str, Any] | None = None,
) -> Execution:
    """``resume RUN``: the paused run continues in its own record (SG-12 clause 3);
    ``answer`` (``{"gate", "answer"}``, SPEC §21) is recorded as it starts."""
    info = check_resumable(layout, run_id)
    layout.check_writable()
    refuse_planted(layout)
    assert info.key is not None
    key_lock = take_key(layout, info.key, run_id)
    try:
        return _reopen(
            layout, run_id, by, notify, key_lock, None, options or StartOptions(), answer
        )
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
    options: StartOptions,
    answer: dict[str, Any] | None,
) -> Execution:
    run_dir = layout.run_dir(run_id)
    refuse_links(layout, run_dir)
    try:
        locks.acquire(run_dir / LIVE_LOCK, content=str(os.getpid()))
    except locks.LockHeld:
        raise AlreadyRunningError(f"run {run_id} is being resumed by another process") from None
    except OSError as exc:
        raise unwritable(run_dir / LIVE_LOCK, exc) from exc
    try:
        info = check_resumable(layout, run_id)  # again, now that we hold it
        assert info.key is not None
        asked: dict[str, Any] = {}
        if answer is not None:  # another answer may have come first
            asked = still_open(info, str(answer.get("gate")))
        ref = flow_of_key(layout, info.key)
        lane = lane_of(layout, info.key)
        if lane is not None and not checked_out_here(lane):  # its own worktree (SPEC §23)
            layout = replace(layout, tree=lane_trees.ensure(layout, lane))
        if loaded is None:
            loaded = load_flow(ref.file, layout.workspace)
        # Budgets and drift, decided now that this process holds the run (SPEC §14, §15).
        found = forecast_resume(
            layout, run_id, ref.folder, declared=loaded.declaration.limits, options=options
        )
        if found.refusal is not None:
            raise found.refusal
        for warning in found.warnings:
            notify(f"warning: {warning}")
        states = StateFile(run_dir / STATE)
        states.refused = dict(info.state_refused)  # warned of already: counted on
        states.adopt(read_run_states(run_dir))
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
        _record_warnings(log, found)
        by = {**who(), **(by or {})}
        answered = None
        if answer is not None:
            answered = {"gate": answer.get("gate"), "answer": answer.get("answer"), "by": by}
        resumed_fields = {
            "budget": found.budget_record(new_run=False),
            "flow_digest": found.flow_digest,
            "git": found.git_now,
        }
        return Execution(
            layout,
            run_id,
            loaded,
            log,
            states,
            frame,
            [key_lock],
            notify,
            resumed_by=by,
            resumed_fields=resumed_fields,
            limit_wait=options.limit_wait,
            stretch=info.stretch + 1,
            answered=answered,
            answers=[*info.gate_answers, *([answer_of(asked, answer)] if answer else [])],
            rerun=info.rerun_round,
        )
    except BaseException:
        locks.release(run_dir / LIVE_LOCK)
        raise


def flow_of_key(layout: Layout, key: str) -> FlowRef:
    """The flow a paused run of ``key`` continues with: the one its key names today, as
    ``run KEY`` would load it — never a path read from the record, so a damaged or
    forged ``flow`` field cannot make a resume import code from somewhere else."""
    return resolve_flow(layout, key, cwd=layout.workspace)
