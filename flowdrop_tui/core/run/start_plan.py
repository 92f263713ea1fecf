"""Where a run's starting state comes from (SPEC §7; FlowDrop SG-12, INT-14, INT-15).

``plan`` resolves, in this fixed order: an explicit snapshot; else a named
checkpoint; else a named run to pick up from; else, for a resumable flow, the
thread's latest state; else a fresh state. Every refusal happens here, before
any run exists.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from flowdrop_tui.core.errors import (
    AlreadyRunningError,
    CheckpointUnresolvedError,
    NoStateForKeyError,
    NotFoundError,
    NotResumableError,
    TerminalSnapshotError,
    UnusableStateError,
    UsageError,
)
from flowdrop_tui.core.paths import CYCLE, RUN_ID_RE, Layout, check_run_ref
from flowdrop_tui.core.records.flow_state import state_log
from flowdrop_tui.core.records.flow_state.snapshot import (
    ensure_resumable,
    read_snapshot_file,
    seed_next_turn,
)
from flowdrop_tui.core.records.flow_state.state import read_run_states
from flowdrop_tui.core.records.listing import index, key_runs
from flowdrop_tui.core.records.log.event_log import side_value
from flowdrop_tui.core.records.run_record.run_fold import load_run
from flowdrop_tui.core.records.run_record.run_info import ENDED, LIVE, TERMINAL, RunInfo, Status
from flowdrop_tui.core.records.spend.budget import Used

STANDARD_FIELDS = frozenset(
    {
        "runId",
        "threadId",
        "status",
        "isComplete",
        "error",
        "data",
        "metadata",
        "messages",
        "currentNodeId",
        "iterationCount",
        "iterator",
    }
)
# What flowdrop itself keeps in a snapshot's metadata: the round number, the run picked
# up from, and what the chain has used of its budget (SPEC §14: a snapshot restored with
# --snapshot keeps its budget use along with its round numbers).
_OWN_METADATA = ("round", "pickedUpFrom", "budgetUsed")


@dataclass
class StartPlan:
    """How a new run starts, or which paused run continues instead."""

    key: str
    start: str = "fresh"  # "snapshot" | "from" | "thread" | "fresh"
    source: str | None = None
    source_status: str | None = None
    snapshot_file: str | None = None
    state: dict[str, Any] = field(default_factory=dict)
    first_round: int = 1
    position: dict[str, Any] | None = None
    carried: dict[str, Any] = field(default_factory=dict)
    budget_used: Used | None = None  # a snapshot's chain use (``metadata.budgetUsed``)
    warnings: list[str] = field(default_factory=list)
    resume: str | None = None  # SG-12 clause 3: this paused run continues in its own record
    # A pick-up from a run older than the thread's newest (``--from OLDER``) forks the
    # thread: ``{"newest": id, "newer": n}``
    # (docs/decisions.md, "What a newcomer tripped on")
    fork: dict[str, Any] | None = None
    # An unresolved ``--resume`` started fresh, looking past the key's head: that run
    # (recorded in ``created`` as ``replaced``; ``prune`` keeps it, SPEC §16)
    replaced: str | None = None


def status_for_snapshot(info: RunInfo) -> str | None:
    if info.status in LIVE:
        return None
    return str(info.status)


def snapshot_of(info: RunInfo, states: dict[str, Any], key: str | None = None) -> dict[str, Any]:
    """A run's state for ``key`` (its own key by default) in the FlowDrop shape."""
    key = key or info.key or ""
    carried = side_value(info.path, info.carried)  # a big one was kept in a side file
    carried = carried if isinstance(carried, dict) else {}
    metadata = dict(carried.get("metadata") or {})
    metadata["round"] = info.key_rounds.get(key, info.first_round - 1)
    metadata["pickedUpFrom"] = info.source
    own = key == info.key
    if own:
        metadata["budgetUsed"] = info.chain_budget().used.to_record()
    status = status_for_snapshot(info)
    snapshot: dict[str, Any] = {
        "runId": info.run,
        "threadId": key,
        "status": status,
        "isComplete": status in {str(s) for s in TERMINAL},
        "error": info.error if status == "failed" else None,
        "data": states.get(key, {}),
        "metadata": metadata,
        "messages": list(carried.get("messages") or []),
        "currentNodeId": info.position["currentNodeId"] if own else "",
        "iterationCount": info.position["iterationCount"] if own else 0,
        "iterator": info.position["iterator"] if own else None,
    }
    for name, value in (carried.get("extra") or {}).items():
        snapshot.setdefault(name, value)
    return snapshot


def _carried_from(snapshot: dict[str, Any]) -> dict[str, Any]:
    """What a new run carries from a snapshot besides its data: kept, never interpreted."""
    metadata = {k: v for k, v in (snapshot.get("metadata") or {}).items() if k not in _OWN_METADATA}
    extra = {k: v for k, v in snapshot.items() if k not in STANDARD_FIELDS}
    carried: dict[str, Any] = {}
    if metadata:
        carried["metadata"] = metadata
    if snapshot.get("messages"):
        carried["messages"] = snapshot["messages"]
    if extra:
        carried["extra"] = extra
    return carried


def _next_round(snapshot: dict[str, Any]) -> int:
    number = (snapshot.get("metadata") or {}).get("round")
    return number + 1 if isinstance(number, int) and number >= 0 else 1


def _position(snapshot: dict[str, Any]) -> dict[str, Any]:
    return {
        "currentNodeId": snapshot.get("currentNodeId") or "",
        "iterationCount": snapshot.get("iterationCount") or 0,
        "iterator": snapshot.get("iterator"),
    }


def _states_of(info: RunInfo) -> dict[str, Any]:
    state_log.settle(info.path)  # a log a kill or a power cut left: state.json made whole
    return read_run_states(info.path)


def _refuse_live(info: RunInfo) -> None:
    if info.status in LIVE:
        raise AlreadyRunningError(
            f"run {info.run} of {info.key} is still running; a live run is never picked up "
            f"from — wait for it, or stop it with: flowdrop-tui stop {info.run}"
        )


def _pick_up(plan: StartPlan, info: RunInfo, start: str) -> StartPlan:
    """SG-12 clause 2: seed a new run from a run that is not being resumed."""
    states = _states_of(info)
    if plan.key not in states:
        raise NoStateForKeyError(
            f"run {info.run} holds no state for {plan.key!r} "
            f"(it is a run of {info.key!r}); name a run of {plan.key!r}"
        )
    seeded = seed_next_turn(snapshot_of(info, states, plan.key))
    plan.start = start
    plan.source = info.run
    plan.source_status = str(info.status)
    plan.state = dict(seeded["data"])
    plan.first_round = _next_round(seeded)
    plan.carried = _carried_from(seeded)
    return plan


def _resume_plan(plan: StartPlan, info: RunInfo, how: str) -> StartPlan:
    if info.key != plan.key:
        raise UsageError(
            f"run {info.run} is a paused run of {info.key!r}, not of {plan.key!r}; "
            f"resume it with: flowdrop-tui resume {info.run}"
        )
    plan.resume = info.run
    plan.start = how
    plan.source = info.run
    plan.source_status = str(info.status)
    return plan


def _from_snapshot(plan: StartPlan, file: Path, resumable: bool) -> StartPlan:
    snapshot = read_snapshot_file(file)
    ensure_resumable(snapshot, f"snapshot {file}")  # INT-14: before any run exists
    if not resumable:
        raise NotResumableError(
            f"{plan.key} does not declare @flow(resumable=True), so it always starts fresh; "
            "it cannot start from a snapshot"
        )
    thread = snapshot.get("threadId")
    if isinstance(thread, str) and thread != plan.key:
        plan.warnings.append(
            f"snapshot {file} is of thread {thread!r}; its state is used for {plan.key!r}"
        )
    run_id = snapshot.get("runId")
    plan.start = "snapshot"
    plan.snapshot_file = str(file)
    plan.source = run_id if isinstance(run_id, str) and RUN_ID_RE.match(run_id) else None
    plan.source_status = snapshot.get("status")
    plan.state = dict(snapshot.get("data") or {})
    plan.first_round = _next_round(snapshot)
    plan.position = _position(snapshot)  # restored untouched, execution position included
    plan.carried = _carried_from(snapshot)
    used = (snapshot.get("metadata") or {}).get("budgetUsed")
    plan.budget_used = Used.from_record(used) if isinstance(used, dict) else None
    return plan


def _from_checkpoint(
    plan: StartPlan, layout: Layout, ref: str, resumable: bool, strict: bool
) -> StartPlan:
    well_formed = check_run_ref(ref)
    if not well_formed or not (layout.runs / ref).is_dir():
        return _unresolved(plan, layout, ref, resumable, strict)
    info = load_run(layout, ref)
    if info.status in ENDED:
        # SG-12 / INT-14: explicit resumption of a run that has ended is refused.
        raise TerminalSnapshotError(
            f"checkpoint {ref} is {info.status}: a run that has ended is not resumed; "
            f"to carry its state into a new run use: flowdrop-tui run {plan.key} --from {ref}"
        )
    _refuse_live(info)
    return _resume_plan(plan, info, info.start or "fresh")


def _unresolved(
    plan: StartPlan, layout: Layout, ref: str, resumable: bool, strict: bool
) -> StartPlan:
    """SG-12 clause 1: a checkpoint that resolves to nothing is a warning and a fresh
    start; under ``--strict`` a refusal. The head it looks past (what a plain run would
    have picked up) is named, with how to get its state back, and kept by ``prune``."""
    head = _latest_holder(layout, plan.key, []) if resumable else None
    if strict:
        past = f"; {plan.key}'s latest state is in run {head.run}" if head is not None else ""
        raise CheckpointUnresolvedError(
            f"checkpoint {ref} resolves to no run (see: flowdrop-tui runs {plan.key}); "
            f"refused under --strict, so nothing starts{past}"
        )
    words = f"checkpoint {ref} resolves to no run; starting fresh"
    if head is not None:
        plan.replaced = head.run
        number = head.key_rounds.get(plan.key, head.round)
        words += (
            f". This looks past run {head.run} ({head.status}, round {number}), the run a "
            f"plain `run {plan.key}` would have picked up; prune keeps it (replaced). "
            + _getting_back(plan.key, head)
        )
    plan.warnings.append(words)
    return plan


def _getting_back(key: str, head: RunInfo) -> str:
    """How to get a looked-past run's state back, for its status."""
    keep = f"flowdrop-tui snapshot {head.run} > s.json"
    if head.status == Status.PAUSED:
        return f"To go on with it: flowdrop-tui resume {head.run} (or keep a copy: {keep})"
    if head.status in TERMINAL:  # a terminal snapshot is not resumable (INT-14): --from
        return f"To get its state back: flowdrop-tui run {key} --from {head.run} (a copy: {keep})"
    return (
        f"To get its state back: {keep}, then flowdrop-tui run {key} --snapshot s.json "
        f"(or: flowdrop-tui run {key} --from {head.run})"
    )


def _from_run(plan: StartPlan, layout: Layout, ref: str, resumable: bool) -> StartPlan:
    well_formed = check_run_ref(ref)
    if not resumable:
        raise NotResumableError(
            f"{plan.key} does not declare @flow(resumable=True), so it always starts fresh "
            "and cannot be picked up with --from (read from the flow as it is today)"
        )
    if not well_formed or not (layout.runs / ref).is_dir():
        raise NotFoundError(f"no run {ref} to pick up from (see: flowdrop-tui runs)")
    info = load_run(layout, ref)
    _refuse_live(info)
    if info.status == Status.PAUSED and info.key == plan.key:
        return _resume_plan(plan, info, info.start or "fresh")
    _pick_up(plan, info, "from")
    _forks(plan, layout, info.run)
    return plan


def _forks(plan: StartPlan, layout: Layout, source: str) -> None:
    """Picking up from a run older than the thread's newest run forks the thread: the
    new run becomes the thread's latest, so every later plain ``run`` continues the fork
    and not the newer runs. Said before anything starts (plan, the preview, run)."""
    newer = key_runs.newer(layout, plan.key, source)
    if not newer:
        return
    plan.fork = {"newest": newer[0], "newer": len(newer)}
    plan.warnings.append(
        f"newer runs exist in {plan.key}'s thread than run {source} ({len(newer)}; the "
        f"newest is {newer[0]}). Picking up from {source} forks the thread: later plain runs of "
        f"{plan.key} continue from this fork, not from {newer[0]} (to go on from the "
        f"newest: flowdrop-tui run {plan.key} --from {newer[0]})"
    )


def _unreadable(layout: Layout, info: RunInfo, warnings: list[str]) -> bool:
    """A run whose record has no readable ``created`` event is never picked up from
    (docs/decisions.md): its round counter and key are unknown. The index may still
    name it (the record was damaged after the index was written); rebuilding, as
    ``reindex`` would, looks past it. Said out loud: the run's state is not used."""
    if info.has_created:
        return False
    warnings.append(
        f"run {info.run} has no readable record ({info.path / CYCLE}); "
        "it was looked past — pick it up explicitly with --from if you mean to"
    )
    index.rebuild(layout)
    return True


def _holds(info: RunInfo, key: str) -> bool:
    """Whether the run's state holds ``key``; an unreadable state counts as holding it,
    so that picking up refuses it naming the file (INT-15) instead of looking past it."""
    try:
        return key in read_run_states(info.path)
    except UnusableStateError:
        return True


def _latest(
    layout: Layout, key: str, warnings: list[str], *, this_run: str | None = None
) -> RunInfo | None:
    """The run holding the thread's latest state for ``key`` (SG-12: the thread's latest
    state), checked against the records; ``None`` when there is none (or it is
    ``this_run``). A live one is refused (it is never picked up from)."""
    info = _latest_holder(layout, key, warnings, this_run=this_run)
    if info is not None:
        _refuse_live(info)
    return info


def pick_up_source(layout: Layout, key: str) -> str | None:
    """The run a plain ``run KEY`` of a resumable flow (or a call of ``KEY``) would pick
    up or resume, whatever its status: what ``prune`` must never delete."""
    info = _latest_holder(layout, key, [])
    return info.run if info is not None else None


def _latest_holder(
    layout: Layout, key: str, warnings: list[str], *, this_run: str | None = None
) -> RunInfo | None:
    """``_latest`` without the refusal. An index that names a run that is gone,
    unreadable, or without the key is rebuilt and asked again."""
    for _ in range(3):
        entry = index.lookup(layout, key)
        source = entry.get("source") if entry else None
        if not isinstance(source, str) or source == this_run:
            return None
        try:
            info = load_run(layout, source)
        except NotFoundError:
            index.rebuild(layout)
            continue
        if _unreadable(layout, info, warnings):
            continue
        if not _holds(info, key):
            index.rebuild(layout)  # the index named a run that never wrote the key
            continue
        return info
    return None


def _from_thread(plan: StartPlan, layout: Layout) -> StartPlan:
    info = _latest(layout, plan.key, plan.warnings)
    if info is None:
        return plan
    if info.status == Status.PAUSED and info.key == plan.key:
        return _resume_plan(plan, info, info.start or "fresh")  # SG-12 clause 3
    return _pick_up(plan, info, "thread")


def plan(
    layout: Layout,
    key: str,
    *,
    resumable: bool,
    snapshot: Path | None = None,
    resume: str | None = None,
    from_run: str | None = None,
    fresh: bool = False,
    strict: bool = False,
) -> StartPlan:
    """Resolve where a run of ``key`` starts from; raises the refusals of SPEC §7
    (``strict``: a ``resume`` id that resolves to nothing is one too)."""
    chosen = [x for x in (snapshot, resume, from_run) if x is not None] + ([True] if fresh else [])
    if len(chosen) > 1:
        raise UsageError("use only one of --snapshot, --resume, --from and --fresh")
    result = StartPlan(key=key)
    if snapshot is not None:
        return _from_snapshot(result, snapshot, resumable)
    if resume is not None:
        return _from_checkpoint(result, layout, resume, resumable, strict)
    if from_run is not None:
        return _from_run(result, layout, from_run, resumable)
    if resumable and not fresh:
        return _from_thread(result, layout)
    return result


def plan_call(
    layout: Layout,
    key: str,
    *,
    resumable: bool,
    run_id: str,
    own: dict[str, Any] | None,
    own_round: int,
) -> StartPlan:
    """Where a flow called inside run ``run_id`` starts: it picks up from the last run
    of *its own* key (this run, if it was called here before), or fresh."""
    result = StartPlan(key=key)
    if not resumable:
        return result
    if own is not None:
        result.start, result.source, result.source_status = "thread", run_id, "running"
        result.state, result.first_round = own, own_round + 1
        return result
    info = _latest(layout, key, result.warnings, this_run=run_id)
    return result if info is None else _pick_up(result, info, "thread")
