"""One run executed by this process: its start, its calls, and how it ends; its
rounds are ``rounds.Rounds``, the part of ``Execution`` a round's changes go to.

The only writer of its record while it holds it. Requests from other processes
and signals are ``signals.RunSignals``'s business; this module turns them into
the run's outcome.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn, TextIO

from flowdrop_tui.core import git
from flowdrop_tui.core.control.lineage import RUN_ENV, own_facts
from flowdrop_tui.core.files import locks
from flowdrop_tui.core.files.atomic import open_fd
from flowdrop_tui.core.flows.declaration import LoadedFlow, error_info, print_flow_traceback
from flowdrop_tui.core.lanes.place import Lane
from flowdrop_tui.core.paths import CYCLE, LIVE_LOCK, OUTPUT, Layout
from flowdrop_tui.core.records import mirror
from flowdrop_tui.core.records.flow_state.state import StateFile
from flowdrop_tui.core.records.listing import index
from flowdrop_tui.core.records.log.event_log import EventLog
from flowdrop_tui.core.records.run_record.run_info import Status
from flowdrop_tui.core.records.spend.budget import LIMIT_WAIT
from flowdrop_tui.core.records.spend.progress import Streaks
from flowdrop_tui.core.run import notices
from flowdrop_tui.core.run.budget_meter import BudgetMeter
from flowdrop_tui.core.run.calls import call_flow
from flowdrop_tui.core.run.context import RunContext
from flowdrop_tui.core.run.frame import Frame, PauseRun, StopRun
from flowdrop_tui.core.run.lane_start import LaneNotReady, prepare
from flowdrop_tui.core.run.moved import NOTHING, RoundMoves
from flowdrop_tui.core.run.process_setup import process_setup
from flowdrop_tui.core.run.rounds import Rounds
from flowdrop_tui.core.run.signals import RunSignals

EXIT_CODES = {
    Status.COMPLETED: 0,
    Status.PAUSED: 0,
    Status.FAILED: 1,
    Status.CANCELLED: 130,
}

Notify = Callable[[str], None]


def quiet(_: str) -> None:
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


class Execution(Rounds):
    """One run being executed by this process (its rounds: ``Rounds``)."""

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
        resumed_fields: dict[str, Any] | None = None,
        limit_wait: float | None = None,
        stretch: int = 1,
        answered: dict[str, Any] | None = None,
        answers: list[dict[str, Any]] | None = None,
        rerun: int | None = None,
        lane: Lane | None = None,
    ) -> None:
        self.layout = layout
        self.run_id = run_id
        self.run_dir = layout.runs / run_id
        self.loaded = loaded
        self.log = log
        self.states = states
        states.on_warning = self._warn
        # A saved state is never ahead of the events before it (round numbers, the budget
        # used, the streaks, ``resumed``): they are flushed first (docs/reliability.md)
        states.keeper.before_durable = log.sync
        self.main = main
        self.key = main.key
        self.frames: list[Frame] = [main]
        self.known_frames: dict[str, Frame] = {main.key: main}
        self.key_locks = key_locks
        self.notify = notify
        self.resumed_by = resumed_by
        self.resumed_fields = resumed_fields or {}  # budget, flow digest, git: for `resumed`
        self.budget_meter = BudgetMeter(layout, run_id, self.run_dir)
        # SPEC §23: a new lane's worktree, made (and set up) as the run starts
        self.lane = lane
        self._measure()
        self.stall = loaded.declaration.stall
        self.streaks: Streaks | None = None  # folded from the record at the first round
        self.closed_sessions: list[dict[str, Any]] = []
        self.progress_value: Any = NOTHING  # ``run.progress(value)`` in the round in flight
        self.children: set[int] = set()  # session processes, for passing an interrupt on
        self.sessions_opened: int | None = None  # counted from the record when first needed
        self.signals = RunSignals(self.run_dir, log, notify, lambda: self.main.round, self.children)
        self.flags = self.signals.flags
        # SPEC §19: the longest one usage-limit wait: --limit-wait, else the flow's, else 12 h
        declared = loaded.declaration.limit_wait
        self.limit_wait = (
            limit_wait
            if limit_wait is not None
            else declared
            if declared is not None
            else LIMIT_WAIT
        )
        self._end_position: dict[str, Any] | None = None
        self._owner = os.getpid()  # the process holding the run; a fork of it never writes
        # SPEC §21: which process of the run this is (started: 1, each resume: +1), the
        # answer a resume brings (``gate_answered``, recorded as it starts), the answers
        # ``ask`` returns to the asks of their gates while the round that asked re-runs,
        # and that round's number: the first round of the run's flow runs it again
        self.stretch = stretch
        self.answered = answered
        self.answers = notices.Answers(answers or [])
        self.rerun = rerun

    def _measure(self) -> None:
        """SPEC §20: what each round moves in the checkout, and the streaks that pause
        a spinning loop."""
        in_git = git.is_repository(self.layout.checkout)
        every_round = self.loaded.declaration.stall_on == "all"
        self.moves = RoundMoves(
            self.layout.checkout, self.states.encoded, in_git, every_round, self.layout
        )

    def _open_lane(self, output: TextIO) -> None:
        """A lane's worktree made, and set up, before its first round; its working
        folder from then on. A failure ends the run failed (``LaneNotReady``)."""
        if self.lane is None:
            return
        setup = self.loaded.declaration.setup
        prepare(self.layout, self.lane, setup, self.log, output)
        self._measure()
        os.chdir(self.layout.checkout)

    # -- what the flow sees ---------------------------------------------------------
    @property
    def interrupts(self) -> int:
        """SIGINTs this run has taken (``SessionHost``): a session sees them change."""
        return self.signals.interrupts

    @property
    def stop_requested(self) -> bool:
        return self.signals.stop_requested

    def _warn(self, message: str) -> None:
        self.log.append("warning", kind="state", message=message)
        self.notify(f"warning: {message}")

    # -- calls -------------------------------------------------------------------------------
    def call(self, caller: Frame, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        return call_flow(self, caller, name, args, kwargs)

    def update_index(self, write: Callable[[], None]) -> None:
        """The index is a cache: failing to write it never stops a run. A failed write
        removes it (index.update_locked), so readers rebuild it from the records."""
        if os.getpid() != self._owner:
            return  # a forked child of the flow never writes the run's records
        try:
            write()
        except OSError as exc:
            where = f" ({exc.filename})" if exc.filename else ""
            message = f"the index was not updated: {exc.strerror or exc}{where}; it is rebuilt"
            self.log.append("warning", kind="index", message=message)
            self.notify(f"warning: {message}")

    # -- the whole run -------------------------------------------------------------------------
    def execute(self, *, capture: TextIO | None = None) -> Outcome:
        """Run the flow to its end, pause or stop. ``capture``: also echo prints there."""
        # Until the flow has answered, an escaping interrupt means "stopped" (Ctrl-C
        # while starting); an escaping anything else is a failure of the run.
        status = Status.CANCELLED
        result: Any = None
        error: dict[str, Any] | None = None
        with contextlib.ExitStack() as stack:  # unwound after the run has ended
            fd = open_fd(self.run_dir / OUTPUT, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
            output = stack.enter_context(open(fd, "a", buffering=1, errors="replace"))
            try:
                # a lane's worktree may not stand yet: made in _open_lane
                cwd = self.layout.workspace if self.lane is not None else self.layout.checkout
                stack.enter_context(process_setup(cwd, capture, output, self.signals))
                self._announce_start()
                stack.callback(_restore_env, os.environ.get(RUN_ENV))
                os.environ[RUN_ENV] = self.run_id  # SPEC §21: the run's tree carries its id
                try:
                    self._open_lane(output)
                    result = self.loaded.function(RunContext(self, self.main))
                    if os.getpid() != self._owner:
                        _leave_forked_child(None)
                    status = Status.CANCELLED if self.flags.stop else Status.COMPLETED
                    self.reap()
                except BaseException as exc:
                    if os.getpid() != self._owner:
                        _leave_forked_child(exc)
                    status, error = self._classify(exc)
                    self._end_position = self.position()  # where the run was, before closing
                    # Close open rounds now, while the flow's frame (and its rounds()
                    # generator) is still alive: once the exception is dropped, the
                    # generator is closed and would record the round as finished "ok".
                    self.close_loops(list(self.known_frames.values()), _round_outcome(status))
            except KeyboardInterrupt as exc:
                if os.getpid() != self._owner:
                    _leave_forked_child(exc)
                status = Status.CANCELLED
            finally:
                if os.getpid() != self._owner:
                    _leave_forked_child(None)
                self.flags.finishing = True
                outcome = self._finish(status, result, error)
        return outcome

    def _announce_start(self) -> None:
        facts = own_facts()  # pid, group, session, start: whose answers are the run's own
        if self.answered is not None:
            self.log.commit("gate_answered", **self.answered)
        if self.resumed_by is not None:
            self.log.append(
                "resumed",
                **facts,
                by=self.resumed_by,
                limit_wait=self.limit_wait,
                **self.resumed_fields,
            )
            with contextlib.suppress(OSError):  # a power cut never brings it back paused
                self.log.sync()  # while its state holds the resumed rounds' work
            self.update_index(lambda: index.record_status(self.layout, self._folded(), [self.key]))
        else:
            self.log.append("started", **facts, limit_wait=self.limit_wait)

    def _classify(self, exc: BaseException) -> tuple[Status, dict[str, Any] | None]:
        if isinstance(exc, PauseRun):
            return Status.PAUSED, None
        if isinstance(exc, LaneNotReady):  # said in one line, no traceback
            return Status.FAILED, exc.error
        if isinstance(exc, StopRun | KeyboardInterrupt):
            return Status.CANCELLED, None
        if isinstance(exc, SystemExit):
            if exc.code in (0, None):
                return Status.COMPLETED, None
            return Status.FAILED, {
                "type": "SystemExit",
                "message": f"the flow exited with {exc.code}",
            }
        print_flow_traceback(exc, sys.stderr)
        return Status.FAILED, error_info(exc, self.loaded.file)

    def _finish(self, status: Status, result: Any, error: dict[str, Any] | None) -> Outcome:
        position = self._end_position or self.position()
        self.close_loops(list(self.known_frames.values()), _round_outcome(status))
        if status != Status.PAUSED:  # SPEC §21: an answer held to the end is let go
            notices.close_unused(self, self.answers.unused(), None)
        self.moves.close()  # SPEC §20: the snapshots' temporary index
        self.states.save()  # SPEC §5.2: the end of the run saves changes inside values
        self.states.close(on_late=lambda message: self.notify(f"warning: {message}"))
        # Durable before the run says so (a power cut must not lose a pause the user
        # was told about, or an end): committed, not just appended.
        notices.at_end(self, status, result, error)
        # SPEC §5.3: how many saves left each unsaveable value out (warned of twice only)
        refused = {"state_refused": dict(self.states.refused)} if self.states.refused else {}
        try:
            if status == Status.PAUSED:
                # git at the pause: what a resume compares with (SPEC §15 drift)
                facts = git.facts(self.layout.checkout)
                self.log.commit(
                    "paused", position=position, round=self.main.round, git=facts, **refused
                )
            else:
                self.log.commit(
                    "ended",
                    **refused,
                    outcome=str(status),
                    result=result,
                    error=error,
                    git=git.facts(self.layout.checkout),
                    position=position,
                    round=self.main.round,
                )
        except OSError as exc:
            self.notify(
                f"warning: the run's end could not be recorded in {self.run_dir / CYCLE} "
                f"({exc.strerror or exc}); it will show as interrupted"
            )
        mirror.at_round_end(self.layout.checkout)  # the run's last work, as a round's
        self.signals.ended()
        if status != Status.PAUSED:
            self.signals.discard_requests()  # a stop or pause that lost the race to the end
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


def _leave_forked_child(exc: BaseException | None) -> NoReturn:
    """A flow forked (no exec) and the child came back out of the flow: it exits here,
    as the child of a fork does, and never writes the run's record — its parent holds
    the run (the child had ended the run a second time and rewritten its state)."""
    code = 0
    if isinstance(exc, SystemExit):
        if isinstance(exc.code, int):
            code = exc.code
        elif exc.code is not None:
            print(exc.code, file=sys.stderr)
            code = 1
    elif exc is not None and not isinstance(exc, PauseRun | StopRun):
        print_flow_traceback(exc, sys.stderr)
        code = 130 if isinstance(exc, KeyboardInterrupt) else 1
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code)


def _restore_env(value: str | None) -> None:
    if value is None:
        os.environ.pop(RUN_ENV, None)
    else:
        os.environ[RUN_ENV] = value


def _round_outcome(status: Status) -> str:
    if status == Status.COMPLETED:
        return "ok"
    return "error" if status == Status.FAILED else "stopped"
