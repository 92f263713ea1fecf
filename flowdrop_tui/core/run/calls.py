"""``run.call(name, ...)``: another flow run inside this run, under its own key (SPEC §3).

A flow that calls another is two flows: each keeps its own state under its own
key in the caller's ``state.json``, and neither writes the other's. A called
flow picks up from the last run of *its* key (``plan.plan_call``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from flowdrop_tui.core.errors import FlowdropError
from flowdrop_tui.core.files import locks
from flowdrop_tui.core.flows.declaration import error_info, load_flow
from flowdrop_tui.core.flows.discovery import resolve_flow
from flowdrop_tui.core.records.flow_state.state import StateFile
from flowdrop_tui.core.records.listing import index
from flowdrop_tui.core.records.run_record.run_info import Status
from flowdrop_tui.core.records.run_record.spending import chain_usage_field
from flowdrop_tui.core.run.context import RunContext, RunHost
from flowdrop_tui.core.run.creation import take_key
from flowdrop_tui.core.run.frame import Frame
from flowdrop_tui.core.run.start_plan import plan_call


class CallHost(RunHost, Protocol):
    """What a call needs of the run beyond what the context does."""

    states: StateFile
    frames: list[Frame]
    known_frames: dict[str, Frame]

    def update_index(self, write: Callable[[], None]) -> None: ...

    def close_loops(self, frames: list[Frame], outcome: str) -> None: ...


def call_flow(
    run: CallHost, caller: Frame, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    """Run flow ``name`` inside ``run`` from ``caller``'s round; returns its result."""
    ref = resolve_flow(run.layout, name, cwd=run.layout.workspace)
    if any(frame.key == ref.key for frame in run.frames):
        raise FlowdropError(f"{ref.key} is already running in this run; a flow cannot call itself")
    loaded = load_flow(ref.file, run.layout.workspace)
    key_lock = take_key(run.layout, ref.key, run.run_id)
    try:
        known = run.known_frames.get(ref.key)
        call_plan = plan_call(
            run.layout,
            ref.key,
            resumable=loaded.declaration.resumable,
            run_id=run.run_id,
            own=dict(known.state) if known is not None else None,
            own_round=known.round if known is not None else 0,
        )
        first_time = ref.key not in run.known_frames
        if first_time:
            # The index learns of the key before state.json holds it (see index.py).
            entry = index.new_entry(
                run.run_id, Status.RUNNING, call_plan.first_round - 1, ref.rel(run.layout)
            )
            run.update_index(lambda: index.set_entries(run.layout, [(ref.key, entry)]))
            state = run.states.state(ref.key, call_plan.state)
        else:
            assert known is not None
            state = known.state
            if call_plan.start == "fresh":
                dict.clear(state)
                dict.update(state, call_plan.state)
                run.states.save()
        frame = Frame(
            key=ref.key,
            flow=ref.rel(run.layout),
            state=state,
            first_round=call_plan.first_round,
            round=call_plan.first_round - 1,
        )
        run.known_frames[ref.key] = frame
        chain: dict[str, Any] = {}
        if first_time:  # what the key's chain spent before this run took it up
            chain["chain_usage"] = chain_usage_field(run.layout, ref.key, call_plan.source)
        run.log.append(
            "call_started",
            key=ref.key,
            flow=frame.flow,
            by=caller.key,
            start=call_plan.start,
            source=call_plan.source,
            first_round=call_plan.first_round,
            **chain,
        )
        run.frames.append(frame)
        try:
            result = loaded.function(RunContext(run, frame), *args, **kwargs)
            run.reap()
            run.close_loops([frame], "ok")
        except BaseException as exc:
            run.close_loops([frame], "error" if isinstance(exc, Exception) else "stopped")
            run.log.append(
                "call_ended",
                key=ref.key,
                outcome="failed" if isinstance(exc, Exception) else "stopped",
                error=error_info(exc, ref.file) if isinstance(exc, Exception) else None,
            )
            raise
        finally:
            run.frames.pop()
            run.states.save()
        run.log.append("call_ended", key=ref.key, outcome="completed", result=result)
        return result
    finally:
        locks.release(key_lock)
