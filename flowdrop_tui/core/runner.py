"""Create a run, execute its flow, and end it — the only writer of a run's record.

Order of creation (under the index lock): the index entry first, then the
record built in a hidden folder and renamed into place. A kill before the
rename leaves an index pointing at a run that is gone, which triggers a
rebuild; no kill can leave a record the index silently misses. The run's
process holds its ``live.lock`` from before the record appears until it ends,
and its key's lock for as long as it runs that key.
"""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import signal
import socket
import sys
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from . import control, git, index, locks
from .declaration import LoadedFlow, load_flow
from .errors import AlreadyRunningError, FlowdropError, RecordsUnwritableError
from .flows import FlowRef, resolve_flow
from .paths import (
    CYCLE,
    LIVE_LOCK,
    OUTPUT,
    REQUESTS,
    RUN_ID_RE,
    SESSIONS,
    STATE,
    Layout,
    new_run_id,
)
from .records import (
    RECORD_VERSION,
    EventLog,
    Status,
    fold,
    load_run,
    now_iso,
    read_events,
    who,
)
from .runtime import Frame, Loop, PauseRun, RunContext, StopRun, elapsed
from .start import StartPlan, plan, plan_call
from .state import StateFile, encode, read_states, write_atomic

STOP_NOW_GRACE = 10.0  # SPEC §10: killed if not ended this long after "stop now"
WATCH_INTERVAL = 0.2
EXIT_CODES = {
    Status.COMPLETED: 0,
    Status.PAUSED: 0,
    Status.FAILED: 1,
    Status.CANCELLED: 130,
}

Notify = Callable[[str], None]


def _quiet(_: str) -> None:
    pass


@dataclass
class Outcome:
    run_id: str
    key: str
    status: Status
    result: Any = None
    error: dict[str, Any] | None = None
    first_round: int = 1
    last_round: int | None = None

    @property
    def exit_code(self) -> int:
        return EXIT_CODES.get(self.status, 1)


@dataclass
class _Flags:
    stop: bool = False
    stop_now: bool = False
    pause: bool = False
    finishing: bool = False
    ended: bool = False


# -- taking a key ------------------------------------------------------------------


def take_key(layout: Layout, key: str, run_id: str) -> Path:
    """Hold ``key``'s lock for ``run_id``; refuse, naming the live run, when it is taken."""
    path = layout.key_lock(key)
    try:
        locks.acquire(path, content=run_id)
    except OSError as exc:
        raise _unwritable(path, exc) from exc
    except locks.LockHeld:
        holder = ""
        for _ in range(20):  # the holder writes its run id right after locking
            holder = locks.read_content(path)
            if RUN_ID_RE.match(holder) and (layout.runs / holder).is_dir():
                break
            time.sleep(0.05)
        if not RUN_ID_RE.match(holder):
            holder = ""  # read from a file: named only when it is a run id, never a path
        named = f"run {holder}" if holder else "another run"
        raise AlreadyRunningError(
            f"{key} is already running ({named}); one live run per flow — "
            f"stop it with: flowdrop-tui stop {holder or 'RUN'}"
        ) from None
    return path


# -- creating a run -----------------------------------------------------------------


def _created_event(
    layout: Layout, run_id: str, ref: FlowRef, loaded: LoadedFlow, plan_: StartPlan
) -> dict[str, Any]:
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
        "resumable": loaded.declaration.resumable,
        "pid": os.getpid(),
        "pgid": os.getpgrp(),
        "host": socket.gethostname(),
        "git": git.facts(layout.workspace),
    }
    if plan_.position is not None:
        event["position"] = plan_.position
    if plan_.carried:
        event["carried"] = plan_.carried
    return event


def _create_record(
    layout: Layout, run_id: str, key: str, created: dict[str, Any], state: dict[str, Any]
) -> EventLog:
    final = layout.runs / run_id
    hidden = layout.runs / f".new-{run_id}"
    with locks.exclusive(layout.index_lock):
        previous: dict[str, Any] = {}

        def point_at_new_run(keys: dict[str, Any]) -> None:
            previous.update(keys.get(key) or {})
            keys[key] = {
                "last_run": run_id,
                "source": run_id,
                "status": str(Status.PENDING),
                "round": created["first_round"] - 1,
                "flow": created["flow"],
            }

        index.update_locked(layout, point_at_new_run)
        try:
            hidden.mkdir()
            (hidden / SESSIONS).mkdir()
            (hidden / REQUESTS).mkdir()
            locks.acquire(hidden / LIVE_LOCK, content=str(os.getpid()))
            write_atomic(hidden / STATE, encode({key: state}))
            log = EventLog(hidden / CYCLE)
            log.append("created", **created)
            (hidden / OUTPUT).touch()
            os.rename(hidden, final)
            locks.rekey(hidden / LIVE_LOCK, final / LIVE_LOCK)
            log.path = final / CYCLE
        except BaseException:
            locks.release(hidden / LIVE_LOCK)
            shutil.rmtree(hidden, ignore_errors=True)

            def restore(keys: dict[str, Any]) -> None:
                if previous:
                    keys[key] = previous
                else:
                    keys.pop(key, None)

            try:
                index.update_locked(layout, restore)
            except OSError:
                pass  # the entry points at a run that is gone: the next reader rebuilds
            raise
    return log


def open_run(
    layout: Layout,
    ref: FlowRef,
    *,
    snapshot: Path | None = None,
    resume: str | None = None,
    from_run: str | None = None,
    fresh: bool = False,
    by: dict[str, Any] | None = None,
    notify: Notify = _quiet,
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
        created = _created_event(layout, run_id, ref, loaded, start_plan)
        try:
            log = _create_record(layout, run_id, ref.key, created, start_plan.state)
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
    layout: Layout, run_id: str, *, by: dict[str, Any] | None = None, notify: Notify = _quiet
) -> Execution:
    """``resume RUN``: the paused run continues in its own record (SG-12 clause 3)."""
    info = control.check_resumable(layout, run_id)
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
        raise _unwritable(run_dir / LIVE_LOCK, exc) from exc
    try:
        info = control.check_resumable(layout, run_id)  # again, now that we hold it
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
            raise _unwritable(run_dir / CYCLE, exc) from exc
        by = {**who(), **(by or {})}
        return Execution(
            layout, run_id, loaded, log, states, frame, [key_lock], notify, resumed_by=by
        )
    except BaseException:
        locks.release(run_dir / LIVE_LOCK)
        raise


# The files and folders of a record that a paused run's folder is written through again.
_RECORD_ENTRIES = (CYCLE, STATE, OUTPUT, LIVE_LOCK, SESSIONS, REQUESTS)


def refuse_links(run_dir: Path) -> None:
    """Refuse to write a record again (resume, closing a paused run) through a link.

    Only a paused run's folder is ever written twice, and the engine never follows a
    link there for writing: a link left in a record could otherwise send its state,
    events or session links to a file outside ``.flowdrop/``.
    """
    for name in _RECORD_ENTRIES:
        if (run_dir / name).is_symlink():
            raise RecordsUnwritableError(
                f"{run_dir / name} is a link, not the record's own file; the engine never "
                "writes through a link in a record — put the file itself back to continue"
            )


def _unwritable(path: Path, exc: OSError) -> RecordsUnwritableError:
    return RecordsUnwritableError(f"cannot write {path}: {exc.strerror or exc}")


def flow_of_key(layout: Layout, key: str) -> FlowRef:
    """The flow a paused run of ``key`` continues with: the one its key names today, as
    ``run KEY`` would load it — never a path read from the record, so a damaged or
    forged ``flow`` field cannot make a resume import code from somewhere else."""
    return resolve_flow(layout, key, cwd=layout.workspace)


def close_paused(layout: Layout, run_id: str, by: dict[str, Any]) -> bool:
    """``stop`` of a paused run: close it ``cancelled`` without running it.

    Returns False when the run is no longer paused (it was resumed meanwhile).
    """
    run_dir = layout.run_dir(run_id)
    refuse_links(run_dir)
    try:
        locks.acquire(run_dir / LIVE_LOCK, content=str(os.getpid()))
    except locks.LockHeld:
        return False
    except OSError as exc:
        raise _unwritable(run_dir / LIVE_LOCK, exc) from exc
    try:
        info = load_run(layout, run_id)
        if info.status != Status.PAUSED:
            return False
        try:
            log = EventLog(run_dir / CYCLE)
        except OSError as exc:
            raise _unwritable(run_dir / CYCLE, exc) from exc
        log.append("stop_requested", by=by, now=False)
        end_git = git.facts(layout.workspace)
        log.append(
            "ended",
            outcome=str(Status.CANCELLED),
            result=None,
            error=None,
            git=end_git,
            position=info.position,
            round=info.round,
        )
        log.close()
        final = fold(run_id, run_dir, read_events(run_dir / CYCLE))
        with contextlib.suppress(OSError):  # the index was removed: readers rebuild it
            index.record_status(layout, final, [info.key or "", *final.called])
        return True
    finally:
        locks.release(run_dir / LIVE_LOCK)


# -- executing ---------------------------------------------------------------------------


class _Tee(io.TextIOBase):
    """A foreground run's prints: to the terminal and to ``output.log``."""

    def __init__(self, *targets: TextIO) -> None:
        self._targets = targets

    def write(self, text: str) -> int:
        for target in self._targets:
            try:
                target.write(text)
                target.flush()
            except (OSError, ValueError):
                pass
        return len(text)

    def flush(self) -> None:
        for target in self._targets:
            with contextlib.suppress(OSError, ValueError):
                target.flush()

    def isatty(self) -> bool:
        return False


@dataclass
class _Saved:
    handlers: dict[int, Any] = field(default_factory=dict)
    stdout: TextIO | None = None
    stderr: TextIO | None = None
    cwd: str | None = None


class Execution:
    """One run being executed by this process."""

    def __init__(
        self,
        layout: Layout,
        run_id: str,
        loaded: LoadedFlow,
        log: EventLog,
        states: StateFile,
        main: Frame,
        key_locks: list[Path],
        notify: Notify,
        *,
        resumed_by: dict[str, Any] | None,
    ) -> None:
        self.layout = layout
        self.run_id = run_id
        self.run_dir = layout.runs / run_id
        self.loaded = loaded
        self.log = log
        self.states = states
        states.on_warning = self._warn
        self.main = main
        self.key = main.key
        self.frames: list[Frame] = [main]
        self.known_frames: dict[str, Frame] = {main.key: main}
        self.key_locks = key_locks
        self.notify = notify
        self.resumed_by = resumed_by
        self.inbox = control.Inbox(self.run_dir)
        self.flags = _Flags()
        self.children: set[int] = set()  # session processes, for passing an interrupt on
        self._watchdog: threading.Timer | None = None
        self._watcher_stop = threading.Event()
        self._saved = _Saved()
        self._output: TextIO | None = None
        self._end_position: dict[str, Any] | None = None
        self._notices: list[str] = []

    # -- what the flow sees ---------------------------------------------------------
    @property
    def stop_requested(self) -> bool:
        self.poll_requests()
        return self.flags.stop or self.flags.stop_now

    def node(self) -> str:
        """The key of the flow whose round is in flight (innermost), or "" between rounds."""
        for frame in reversed(self.frames):
            if frame.open_round is not None:
                return frame.key
        return ""

    def position(self) -> dict[str, Any]:
        return {
            "currentNodeId": self.node(),
            "iterationCount": self.main.finished,
            "iterator": self.main.iterator,
        }

    def _update_index(self, write: Callable[[], None]) -> None:
        """The index is a cache: failing to write it never stops a run. A failed write
        removes it (index.update_locked), so readers rebuild it from the records."""
        try:
            write()
        except OSError as exc:
            where = f" ({exc.filename})" if exc.filename else ""
            message = f"the index was not updated: {exc.strerror or exc}{where}; it is rebuilt"
            self.log.append("warning", kind="index", message=message)
            self.notify(f"warning: {message}")

    def _warn(self, message: str) -> None:
        self.log.append("warning", kind="state", message=message)
        self.notify(f"warning: {message}")

    # -- requests from other processes ----------------------------------------------------
    def poll_requests(self) -> None:
        for request in self.inbox.take():
            if request.kind == control.PAUSE:
                if not self.flags.pause:
                    self.flags.pause = True
                    self.log.append("pause_requested", by=request.by)
            else:
                self.note_stop(request.kind == control.STOP_NOW, request.by)

    def note_stop(self, now: bool, by: dict[str, Any]) -> None:
        if now and not self.flags.stop_now:
            self.flags.stop_now = self.flags.stop = True
            self.log.append("stop_requested", by=by, now=True)
            self._arm_watchdog()
        elif not now and not self.flags.stop:
            self.flags.stop = True
            self.log.append("stop_requested", by=by, now=False)

    def _arm_watchdog(self) -> None:
        if self._watchdog is None:
            self._watchdog = threading.Timer(STOP_NOW_GRACE, self._grace_expired)
            self._watchdog.daemon = True
            self._watchdog.start()

    def _grace_expired(self) -> None:
        if self.flags.ended:
            return
        self.log.append(
            "killing",
            reason=f"not ended {STOP_NOW_GRACE:g} s after stop now",
            signal="SIGKILL",
        )
        control.kill_own_group()

    def _watch(self) -> None:
        while not self._watcher_stop.wait(WATCH_INTERVAL):
            try:
                self.poll_requests()
                while self._notices:
                    self.notify(self._notices.pop(0))
            except Exception:  # a bad request file must not end the watcher
                pass

    def _on_interrupt(self, signum: int, _frame: Any) -> None:
        name = signal.Signals(signum).name
        if self.flags.finishing:
            return  # already saving and ending: let it finish
        self.poll_requests()
        graceful = signum == signal.SIGINT and not (self.flags.stop or self.flags.stop_now)
        if graceful:
            self.note_stop(False, {"signal": name, "pid": None, "via": "Ctrl-C"})
            self.notify(f"stopping after round {self.main.round} — press Ctrl-C again to stop now")
            return
        self.note_stop(True, {"signal": name, "via": "Ctrl-C" if signum == signal.SIGINT else name})
        if os.getpgrp() != os.getpid():
            control.forward_interrupt(sorted(self.children))
        raise KeyboardInterrupt

    def between_rounds(self) -> None:
        """SPEC §6: requests are acted on between rounds, never inside one."""
        self.poll_requests()
        if self.flags.stop or self.flags.stop_now:
            raise StopRun
        if self.flags.pause:
            raise PauseRun

    # -- rounds --------------------------------------------------------------------------
    def begin_round(self, loop: Loop, index_: int | None) -> int:
        self.reap()
        frame = loop.frame
        frame.round += 1
        loop.open_round = frame.round
        loop.open_index = index_
        loop.began = time.monotonic()
        if frame is self.main:
            frame.iterator = index_
        self.log.append("round_started", key=frame.key, round=frame.round, index=index_)
        return frame.round

    def end_round(self, loop: Loop, outcome: str) -> None:
        number = loop.open_round
        if number is None:
            return
        loop.open_round = None
        frame = loop.frame
        if frame is self.main and outcome == "ok":
            frame.finished += 1
            if loop.open_index is not None:
                frame.iterator = loop.open_index + 1
        self.log.append(
            "round_ended",
            key=frame.key,
            round=number,
            index=loop.open_index,
            outcome=outcome,
            seconds=elapsed(loop.began),
        )
        self.states.save()  # SPEC §5.2: changes inside values are saved at each round end

    def forget(self, loop: Loop) -> None:
        if loop in loop.frame.loops:
            loop.frame.loops.remove(loop)

    def reap(self) -> None:
        """End the rounds of loops the flow has left (``break``, ``return``) as finished.

        The run holds each loop's generator; once only the run refers to it
        (two references: the attribute and ``getrefcount``'s argument), the flow
        has left the loop normally.
        """
        for frame in list(self.known_frames.values()):
            for loop in list(frame.loops):
                if loop.gen is not None and sys.getrefcount(loop.gen) <= 2:
                    self.end_round(loop, "ok")
                    self.forget(loop)
                    loop.gen = None

    def close_loops(self, frames: list[Frame], outcome: str) -> None:
        """End every open round of ``frames`` with ``outcome`` and let their loops go."""
        for frame in reversed(frames):
            for loop in reversed(list(frame.loops)):
                self.end_round(loop, outcome)
            loops, frame.loops = frame.loops, []
            for loop in loops:
                loop.gen = None

    # -- calls -------------------------------------------------------------------------------
    def call(self, caller: Frame, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        ref = resolve_flow(self.layout, name, cwd=self.layout.workspace)
        if any(frame.key == ref.key for frame in self.frames):
            raise FlowdropError(
                f"{ref.key} is already running in this run; a flow cannot call itself"
            )
        loaded = load_flow(ref.file, self.layout.workspace)
        key_lock = take_key(self.layout, ref.key, self.run_id)
        try:
            known = self.known_frames.get(ref.key)
            call_plan = plan_call(
                self.layout,
                ref.key,
                resumable=loaded.declaration.resumable,
                run_id=self.run_id,
                own=dict(known.state) if known is not None else None,
                own_round=known.round if known is not None else 0,
            )
            first_time = ref.key not in self.known_frames
            if first_time:
                # The index learns of the key before state.json holds it (see index.py).
                entry = {
                    "last_run": self.run_id,
                    "source": self.run_id,
                    "status": str(Status.RUNNING),
                    "round": call_plan.first_round - 1,
                    "flow": ref.rel(self.layout),
                }
                self._update_index(lambda: index.set_entries(self.layout, [(ref.key, entry)]))
                state = self.states.state(ref.key, call_plan.state)
            else:
                assert known is not None
                state = known.state
                if call_plan.start == "fresh":
                    dict.clear(state)
                    dict.update(state, call_plan.state)
                    self.states.save()
            frame = Frame(
                key=ref.key,
                flow=ref.rel(self.layout),
                state=state,
                first_round=call_plan.first_round,
                round=call_plan.first_round - 1,
            )
            self.known_frames[ref.key] = frame
            self.log.append(
                "call_started",
                key=ref.key,
                flow=frame.flow,
                by=caller.key,
                start=call_plan.start,
                source=call_plan.source,
                first_round=call_plan.first_round,
            )
            self.frames.append(frame)
            try:
                result = loaded.function(RunContext(self, frame), *args, **kwargs)
                self.reap()
                self.close_loops([frame], "ok")
            except BaseException as exc:
                self.close_loops([frame], "error" if isinstance(exc, Exception) else "stopped")
                self.log.append(
                    "call_ended",
                    key=ref.key,
                    outcome="failed" if isinstance(exc, Exception) else "stopped",
                    error=_error_info(exc, ref.file) if isinstance(exc, Exception) else None,
                )
                raise
            finally:
                self.frames.pop()
                self.states.save()
            self.log.append("call_ended", key=ref.key, outcome="completed", result=result)
            return result
        finally:
            locks.release(key_lock)

    # -- the whole run -------------------------------------------------------------------------
    def _install(self, capture: TextIO | None) -> None:
        saved = self._saved
        saved.cwd = os.getcwd()
        os.chdir(self.layout.workspace)
        if threading.current_thread() is threading.main_thread():
            for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
                saved.handlers[signum] = signal.signal(signum, self._on_interrupt)
        if capture is not None and self._output is not None:
            saved.stdout, saved.stderr = sys.stdout, sys.stderr
            sys.stdout = _Tee(capture, self._output)
            sys.stderr = _Tee(saved.stderr, self._output)
        threading.Thread(target=self._watch, name="flowdrop-requests", daemon=True).start()

    def _uninstall(self) -> None:
        saved = self._saved
        self._watcher_stop.set()
        for signum, handler in saved.handlers.items():
            signal.signal(signum, handler)
        if saved.stdout is not None and saved.stderr is not None:
            sys.stdout, sys.stderr = saved.stdout, saved.stderr
        if saved.cwd is not None:
            with contextlib.suppress(OSError):
                os.chdir(saved.cwd)

    def execute(self, *, capture: TextIO | None = None) -> Outcome:
        """Run the flow to its end, pause or stop. ``capture``: also echo prints there."""
        output = open(self.run_dir / OUTPUT, "a", buffering=1, errors="replace")  # noqa: SIM115
        self._output = output
        # Until the flow has answered, an escaping interrupt means "stopped" (Ctrl-C
        # while starting); an escaping anything else is a failure of the run.
        status = Status.CANCELLED
        result: Any = None
        error: dict[str, Any] | None = None
        try:
            self._install(capture)
            if self.resumed_by is not None:
                self.log.append("resumed", pid=os.getpid(), pgid=os.getpgrp(), by=self.resumed_by)
                self._update_index(
                    lambda: index.record_status(self.layout, self._folded(), [self.key])
                )
            else:
                self.log.append("started", pid=os.getpid(), pgid=os.getpgrp())
            try:
                result = self.loaded.function(RunContext(self, self.main))
                status = Status.CANCELLED if self.flags.stop else Status.COMPLETED
                self.reap()
            except BaseException as exc:
                status, error = self._classify(exc)
                self._end_position = self.position()  # where the run was, before closing
                # Close open rounds now, while the flow's frame (and its rounds()
                # generator) is still alive: once the exception is dropped, the
                # generator is closed and would record the round as finished "ok".
                self.close_loops(list(self.known_frames.values()), _round_outcome(status))
        except KeyboardInterrupt:
            status = Status.CANCELLED
        finally:
            self.flags.finishing = True
            try:
                outcome = self._finish(status, result, error)
            finally:
                self._uninstall()
                output.close()
        return outcome

    def _classify(self, exc: BaseException) -> tuple[Status, dict[str, Any] | None]:
        if isinstance(exc, PauseRun):
            return Status.PAUSED, None
        if isinstance(exc, StopRun | KeyboardInterrupt):
            return Status.CANCELLED, None
        if isinstance(exc, SystemExit):
            if exc.code in (0, None):
                return Status.COMPLETED, None
            return Status.FAILED, {
                "type": "SystemExit",
                "message": f"the flow exited with {exc.code}",
            }
        traceback.print_exception(exc, file=sys.stderr)
        return Status.FAILED, _error_info(exc, self.loaded.file)

    def _folded(self) -> Any:
        return fold(self.run_id, self.run_dir, read_events(self.run_dir / CYCLE))

    def _finish(self, status: Status, result: Any, error: dict[str, Any] | None) -> Outcome:
        position = self._end_position or self.position()
        self.close_loops(list(self.known_frames.values()), _round_outcome(status))
        self.states.save()  # SPEC §5.2: the end of the run saves changes inside values
        self.states.close()
        if status == Status.PAUSED:
            self.log.append("paused", position=position, round=self.main.round)
        else:
            self.log.append(
                "ended",
                outcome=str(status),
                result=result,
                error=error,
                git=git.facts(self.layout.workspace),
                position=position,
                round=self.main.round,
            )
        self.flags.ended = True
        if self._watchdog is not None:
            self._watchdog.cancel()
        try:
            index.record_status(self.layout, self._folded(), list(self.known_frames))
        except OSError as exc:
            self.notify(f"warning: the index was not updated ({exc}); it is rebuilt when read")
        self.log.close()
        for path in self.key_locks:
            locks.release(path)
        locks.release(self.run_dir / LIVE_LOCK)
        return Outcome(
            run_id=self.run_id,
            key=self.key,
            status=status,
            result=result,
            error=error,
            first_round=self.main.first_round,
            last_round=self.main.round if self.main.round >= self.main.first_round else None,
        )


def _round_outcome(status: Status) -> str:
    if status == Status.COMPLETED:
        return "ok"
    return "error" if status == Status.FAILED else "stopped"


def _error_info(exc: BaseException, file: Path) -> dict[str, Any]:
    frames = traceback.extract_tb(exc.__traceback__)
    folder = str(file.parent)
    where = next(
        (f for f in reversed(frames) if f.filename.startswith(folder + os.sep)),
        frames[-1] if frames else None,
    )
    return {
        "type": type(exc).__name__,
        "message": str(exc),
        "file": where.filename if where else None,
        "line": where.lineno if where else None,
        "at": now_iso(),
    }
