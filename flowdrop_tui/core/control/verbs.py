"""What others ask of a run: stop, pause, resume's check, and closing a paused run (SPEC §10).

The core answers in data (``Asked``); the CLI and the UI word it. Refusals carry
INT-16 codes. Only ``stop --now`` also signals (``process.interrupt``); every
other request is a file the run takes between rounds (``requests``).
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from flowdrop_tui.core import git
from flowdrop_tui.core.control import process, requests
from flowdrop_tui.core.errors import (
    AlreadyPausedError,
    NoActivePauseError,
    SignalPendingError,
    SignalRefusedError,
    TerminalSnapshotError,
)
from flowdrop_tui.core.files import locks
from flowdrop_tui.core.paths import CYCLE, LIVE_LOCK, Layout
from flowdrop_tui.core.records import index
from flowdrop_tui.core.records.event_log import EventLog, who
from flowdrop_tui.core.records.folder import refuse_links, unwritable
from flowdrop_tui.core.records.liveness import local_pid
from flowdrop_tui.core.records.run_fold import fold_run, load_run
from flowdrop_tui.core.records.run_info import ENDED, LIVE, RunInfo, Status


class Action(StrEnum):
    """What a stop or pause request did."""

    STOP_AFTER_ROUND = "stop"  # the run stops after the round in flight
    STOP_NOW = "stop_now"  # the round in flight is interrupted
    CLOSED = "closed"  # a paused run was closed cancelled without running
    PAUSE_AFTER_ROUND = "pause"  # the run pauses after the round in flight


@dataclass(frozen=True)
class Asked:
    """The answer to ``stop`` or ``pause``: which run, what was done, at which round."""

    run: str
    key: str | None
    action: Action
    round: int


def pick_up_hint(info: RunInfo) -> str:
    """How to pick ``info`` up: its key, when its record still names one."""
    if info.key is not None:
        return f"pick it up with: flowdrop-tui run {info.key} --from {info.run}"
    # A record with no readable `created` event names no flow (it had said `run None`).
    return (
        f"its record names no flow ({info.path / CYCLE} has no readable creation); "
        f"to carry its state on, pick it up with: flowdrop-tui run FLOW --from {info.run}"
    )


def _refuse_ended(info: RunInfo, verb: str) -> None:
    if info.status in ENDED:
        raise TerminalSnapshotError(
            f"cannot {verb} run {info.run}: it has ended ({info.status}); {pick_up_hint(info)}"
        )


def refuse_paused(info: RunInfo) -> None:
    """Escape's rule: a key meant to stop a live run refuses a run that paused meanwhile
    (``ALREADY_PAUSED``) instead of closing it (also the UI's, in remote mode)."""
    if info.status == Status.PAUSED:
        raise AlreadyPausedError(
            f"run {info.run} is paused, so it was left as it is; resume it, or close it "
            f"for good with: flowdrop-tui stop {info.run}"
        )


def stop(
    layout: Layout,
    run_id: str,
    *,
    now: bool = False,
    by: dict[str, Any] | None = None,
    keep_paused: bool = False,
) -> Asked:
    """Ask a run to stop after its round (``now``: at once); a paused run is closed —
    unless ``keep_paused`` (the UI's escape), which refuses it: a key meant to stop a
    live run never closes a run that paused meanwhile."""
    by = {**who(), "via": "cli", **(by or {})}
    info = load_run(layout, run_id)
    _refuse_ended(info, "stop")
    if keep_paused:
        refuse_paused(info)
    if info.status == Status.PAUSED:
        if close_paused(layout, run_id, by):
            return Asked(run_id, info.key, Action.CLOSED, info.round)
        info = load_run(layout, run_id)  # it was resumed meanwhile: ask it like a live run
        _refuse_ended(info, "stop")
    if now or info.stop_pending or requests.is_pending(info.path, requests.STOP):
        requests.post(info.path, requests.STOP_NOW, by)
        pid = local_pid(info.path)  # never a pid a replica's marker names (another machine)
        if pid is not None:
            process.interrupt(pid)
        return Asked(run_id, info.key, Action.STOP_NOW, info.round)
    requests.post(info.path, requests.STOP, by)
    return Asked(run_id, info.key, Action.STOP_AFTER_ROUND, info.round)


def refuse_graph(info: RunInfo, verb: str) -> None:
    """A LangGraph graph's run (SPEC §22) pauses at its ``interrupt()`` and goes on when
    the graph is invoked again: there is no flow for ``pause`` or ``resume`` to run."""
    if info.flow == index.GRAPH_FLOW:
        raise SignalRefusedError(
            f"cannot {verb} run {info.run}: it is a LangGraph graph's run; a graph pauses "
            "at interrupt() and goes on when invoked again with Command(resume=…)"
        )


def pause(layout: Layout, run_id: str, *, by: dict[str, Any] | None = None) -> Asked:
    """Ask a run to pause after its round; its process saves and exits."""
    by = {**who(), "via": "cli", **(by or {})}
    info = load_run(layout, run_id)
    _refuse_ended(info, "pause")
    refuse_graph(info, "pause")
    if info.status == Status.PAUSED:
        raise AlreadyPausedError(
            f"run {run_id} is already paused; resume it with: flowdrop-tui resume {run_id}"
        )
    # A stop asked but not yet taken by the run is as pending as one it recorded: its
    # request file is there until the run acts on it (the contract suite caught a pause
    # let through in that moment under load).
    stop_asked = info.stop_pending or any(
        requests.is_pending(info.path, kind) for kind in (requests.STOP, requests.STOP_NOW)
    )
    if info.pause_pending or stop_asked or not requests.post(info.path, requests.PAUSE, by):
        what = "a stop" if stop_asked else "a pause"
        raise SignalPendingError(
            f"run {run_id} already has {what} pending; it acts on it after round {info.round}"
        )
    return Asked(run_id, info.key, Action.PAUSE_AFTER_ROUND, info.round)


def check_resumable(layout: Layout, run_id: str) -> RunInfo:
    """Refuse (INT-16) resuming a run that is not paused."""
    info = load_run(layout, run_id)
    if info.status in ENDED:
        raise TerminalSnapshotError(
            f"cannot resume run {run_id}: it has ended ({info.status}) and a finished run is "
            f"never resumed; {pick_up_hint(info)}"
        )
    if info.status in LIVE:
        raise NoActivePauseError(
            f"run {run_id} is not paused (it is {info.status}); only a paused run is resumed"
        )
    refuse_graph(info, "resume")
    return info


def close_paused(layout: Layout, run_id: str, by: dict[str, Any]) -> bool:
    """``stop`` of a paused run: close it ``cancelled`` without running it.

    This process holds the run (its ``live.lock``) while it writes the record, so
    it is the record's only writer. Returns False when the run is no longer
    paused (it was resumed meanwhile).
    """
    run_dir = layout.run_dir(run_id)
    refuse_links(layout, run_dir)
    try:
        locks.acquire(run_dir / LIVE_LOCK, content=str(os.getpid()))
    except locks.LockHeld:
        return False
    except OSError as exc:
        raise unwritable(run_dir / LIVE_LOCK, exc) from exc
    try:
        info = load_run(layout, run_id)
        if info.status != Status.PAUSED:
            return False
        try:
            log = EventLog(run_dir / CYCLE)
        except OSError as exc:
            raise unwritable(run_dir / CYCLE, exc) from exc
        log.append("stop_requested", by=by, now=False)
        log.append(
            "ended",
            outcome=str(Status.CANCELLED),
            result=None,
            error=None,
            git=git.facts(layout.workspace),
            position=info.position,
            round=info.round,
        )
        log.close()
        final = fold_run(layout, run_id, run_dir)  # a big record: from its cached fold
        with contextlib.suppress(OSError):  # the index was removed: readers rebuild it
            index.record_status(layout, final, [info.key or "", *final.called])
        return True
    finally:
        locks.release(run_dir / LIVE_LOCK)
