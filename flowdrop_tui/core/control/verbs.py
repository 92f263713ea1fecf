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
from pathlib import Path
from typing import Any

from flowdrop_tui.core import git
from flowdrop_tui.core.control import process, requests
from flowdrop_tui.core.errors import (
    AlreadyPausedError,
    NoActivePauseError,
    RecordsUnwritableError,
    SignalPendingError,
    SignalRefusedError,
    TerminalSnapshotError,
)
from flowdrop_tui.core.files import locks
from flowdrop_tui.core.files.atomic import datasync
from flowdrop_tui.core.files.regular import open_regular
from flowdrop_tui.core.lanes.known import checkout_of
from flowdrop_tui.core.paths import CYCLE, LIVE_LOCK, Layout
from flowdrop_tui.core.records.listing import index
from flowdrop_tui.core.records.log.event_lines import parse_lines
from flowdrop_tui.core.records.log.event_log import EventLog, who
from flowdrop_tui.core.records.run_record.folder import refuse_links, unwritable
from flowdrop_tui.core.records.run_record.liveness import local_pid
from flowdrop_tui.core.records.run_record.run_fold import fold_run, load_run
from flowdrop_tui.core.records.run_record.run_info import ENDED, LIVE, RunInfo, Status


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
        posted = requests.post(info.path, requests.STOP_NOW, by)
        pid = local_pid(info.path)  # never a pid a replica's marker names (another machine)
        if pid is not None:
            process.interrupt(pid)
        if posted:
            _unless_ended_first(layout, info, requests.STOP_NOW, "stop")
        return Asked(run_id, info.key, Action.STOP_NOW, info.round)
    if requests.post(info.path, requests.STOP, by):
        _unless_ended_first(layout, info, requests.STOP, "stop")
    return Asked(run_id, info.key, Action.STOP_AFTER_ROUND, info.round)


def _unless_ended_first(layout: Layout, asked: RunInfo, kind: str, verb: str) -> None:
    """After a request was posted: refuse it, withdrawn, when the run ended before taking
    it (the race with its natural end; docs/decisions.md, "Stopping and pausing") —
    "stop after round N" of a run that completed meanwhile had been accepted (exit 0)
    and its request file left behind.

    The run, when it ends, removes a request it never took (``RunSignals``); so a
    request gone from an ended run was taken only if the run recorded it, with our pid."""
    last = _last_events(asked.path / CYCLE)  # cheap: a long record is not folded again
    ended = next((e for e in reversed(last) if e.get("event") == "ended"), None)
    if ended is None:
        return  # it takes the request between rounds, or removes it at its end
    if not requests.withdraw(asked.path, kind) and _taken_by_us(last, kind):
        return  # it took the request, then ended: as asked
    raise TerminalSnapshotError(
        f"cannot {verb} run {asked.run}: it ended ({ended.get('outcome')}) before taking "
        f"the request, which was withdrawn; {pick_up_hint(asked)}"
    )


_TAKEN_AS = {
    requests.STOP: "stop_requested",
    requests.STOP_NOW: "stop_requested",
    requests.PAUSE: "pause_requested",
}


def _taken_by_us(last: list[dict[str, Any]], kind: str) -> bool:
    """Whether the record's last events hold ``kind`` taken from this process."""
    me = os.getpid()
    for event in last:
        by = event.get("by")
        if event.get("event") == _TAKEN_AS[kind] and isinstance(by, dict) and by.get("pid") == me:
            return True
    return False


def _last_events(path: Path, window: int = 256 * 1024) -> list[dict[str, Any]]:
    """The events in the last ``window`` bytes of a record (a request is taken just
    before the end: a long record is not read whole for it)."""
    try:
        fd = open_regular(path)
    except OSError:
        return []
    try:
        size = os.fstat(fd).st_size
        start = max(0, size - window)
        raw = os.pread(fd, size - start, start)
    finally:
        os.close(fd)
    if start > 0:
        raw = raw[raw.find(b"\n") + 1 :]  # the first line may be cut: skipped
    return parse_lines(raw)


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
    _unless_ended_first(layout, info, requests.PAUSE, "pause")
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
        _commit_close(layout, run_dir, info, by)
        final = fold_run(layout, run_id, run_dir)  # a big record: from its cached fold
        with contextlib.suppress(OSError):  # the index was removed: readers rebuild it
            index.record_status(layout, final, [info.key or "", *final.called])
        return True
    finally:
        locks.release(run_dir / LIVE_LOCK)


def _commit_close(layout: Layout, run_dir: Path, info: RunInfo, by: dict[str, Any]) -> None:
    """Append the close (``stop_requested``, then ``ended``) and make it durable, or
    leave the record as it was: a later ``resume`` decides on that ``ended``, so it is
    on disk before ``stop`` says "closed" (docs/decisions.md, "Stopping and pausing").
    On a full disk or any write error the record is cut back to its length before, and
    the error names the file
    (``RECORDS_UNWRITABLE``): the run stays paused, nothing claimed."""
    path = run_dir / CYCLE
    # before the record is touched: a git call may be slow; a lane's, of its worktree
    facts = git.facts(checkout_of(layout, info.key))
    try:
        log = EventLog(path)
    except OSError as exc:
        raise unwritable(path, exc) from exc
    try:
        size = os.lseek(log.fileno(), 0, os.SEEK_END)
        try:
            log.commit("stop_requested", by=by, now=False)
            log.commit(
                "ended",
                outcome=str(Status.CANCELLED),
                result=None,
                error=None,
                git=facts,
                position=info.position,
                round=info.round,
            )
        except OSError as exc:
            with contextlib.suppress(OSError):  # this process holds the run: its only writer
                os.ftruncate(log.fileno(), size)
                datasync(log.fileno())
            raise RecordsUnwritableError(
                f"cannot close run {info.run}: cannot write {path}: {exc.strerror or exc}; "
                "nothing was written and it is still paused — free space in "
                f"{layout.root} and stop it again"
            ) from exc
    finally:
        log.close()
