"""The rounds of the run ``execution.Execution`` executes: the checks before each
(budget, stall), the requests taken between them and in a wait, a round's start and
end as the record keeps them, the loops the flow has left.

A part of ``Execution`` (it mixes this in), apart so the round loop reads on its own;
the attributes below are the run's, set by ``Execution.__init__``.
"""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

from flowdrop_tui.core.paths import CYCLE, Layout
from flowdrop_tui.core.records import mirror
from flowdrop_tui.core.records.flow_state.state import StateFile
from flowdrop_tui.core.records.log.event_log import EventLog
from flowdrop_tui.core.records.run_record.run_fold import fold_run
from flowdrop_tui.core.records.spend.progress import Streaks
from flowdrop_tui.core.run import notices
from flowdrop_tui.core.run.budget_meter import BudgetMeter
from flowdrop_tui.core.run.frame import Frame, Loop, PauseRun, StopRun, elapsed
from flowdrop_tui.core.run.moved import NOTHING, RoundMoves
from flowdrop_tui.core.run.signals import Flags, RunSignals


class Rounds:
    """The rounds of one run being executed by this process (``Execution``'s part)."""

    layout: Layout
    run_id: str
    run_dir: Path
    key: str
    log: EventLog
    states: StateFile
    main: Frame
    frames: list[Frame]
    known_frames: dict[str, Frame]
    notify: Callable[[str], None]
    budget_meter: BudgetMeter
    moves: RoundMoves
    stall: int | None
    streaks: Streaks | None
    closed_sessions: list[dict[str, Any]]
    progress_value: Any
    signals: RunSignals
    flags: Flags
    stretch: int
    answers: notices.Answers
    rerun: int | None

    # -- where the run is --------------------------------------------------------------
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

    # -- requests: between rounds, and in a wait inside one ----------------------------
    def hold(self, seconds: float) -> str | None:
        """Wait up to ``seconds`` inside a round (a usage limit, SPEC §19), woken by a
        request as soon as it arrives: ``"stop"`` or ``"pause"`` when one was asked for,
        else ``None``. Never a plain sleep: escape and pause act at once."""
        deadline = time.monotonic() + seconds
        while True:
            self.signals.poll()
            if self.flags.stop or self.flags.stop_now:
                return "stop"
            if self.flags.pause:
                return "pause"
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            self.signals.woken.wait(left)
            self.signals.woken.clear()

    def leave_wait(self, asked: str) -> NoReturn:
        """From a wait: ``"stop"`` ends the run now (cancelled), ``"pause"`` pauses it now."""
        if asked == "pause":
            raise PauseRun
        raise StopRun

    def between_rounds(self) -> None:
        """SPEC §6: requests are acted on between rounds, never inside one."""
        self.signals.poll()
        if self.flags.stop or self.flags.stop_now:
            raise StopRun
        if self.flags.pause:
            raise PauseRun

    # -- rounds --------------------------------------------------------------------------
    def check_budget(self, frame: Frame, again: bool = False) -> None:
        """SPEC §14: before a round, pause when a budget of the chain is reached, so a
        higher limit continues this same run (``resume RUN --max-rounds N``). ``again``:
        the round re-runs (SPEC §21), no new round for the rounds budget."""
        reached = self.budget_meter.reached(rounds=frame is self.main and not again)
        if reached is None:
            return
        unit = " minutes" if reached.budget == "minutes" else ""
        said = (
            f"budget reached: {reached.budget} {reached.used}{unit} used of {reached.limit}; "
            f"pausing before round {frame.round + (0 if again else 1)}"
        )
        notices.announce(self, f"budget-{self.stretch}", "budget_reached", said)
        self.log.append("budget_reached", key=frame.key, **reached.to_json())
        self.notify(said)
        raise PauseRun

    def check_stall(self) -> None:
        """SPEC §20: before a round of the run's own flow, pause when its last rounds
        changed nothing, or failed the same way, ``stall`` times in a row."""
        if self.streaks is None:
            self.streaks = self._folded().streaks  # carried by a pick-up, reset by a resume
            self.moves.progress = self.streaks.progress
        found = self.streaks.reached(self.stall, self.moves.compared)
        if found is None:
            return
        event, fields = found
        self.log.append(event, key=self.key, **fields)
        rounds = fields["rounds"]
        span = f"rounds {rounds[0]}–{rounds[-1]}"
        if event == "stalled":
            why = f"stalled: {len(rounds)} rounds without a change ({span})"
        else:
            error = fields.get("error") or f"exit {fields.get('exit_code')}"
            why = f"same failure {len(rounds)} rounds in a row ({span}): {error}"
        self.notify(f"{why}; pausing before round {self.main.round + 1}")
        raise PauseRun

    def session_starting(self, backend: str) -> None:
        """SPEC §20: a session opening in a round of the run's own flow (or of a flow it
        called): that round is compared with the tree as the session found it."""
        if self.main.open_round is not None:
            self.moves.session_starting(backend)

    def declare_progress(self, value: Any) -> None:
        """``run.progress(value)``: what the round in flight compares on (SPEC §20)."""
        self.progress_value = value

    def ask(self, frame: Frame, question: str, choices: list[str] | None) -> Any:
        """SPEC §21: the answer recorded for this question while its round re-runs, else
        open a gate and pause (no process waits for the answer)."""
        took, answer = self.answers.take(frame.key, question, self.main.open_round)
        if took:
            return answer
        return notices.open_gate(self, frame, question, choices, ask=self.answers.asked)

    @property
    def next_round(self) -> int:
        """The number the next round of the run's flow takes (a re-run keeps its own)."""
        return self.rerun if self.rerun == self.main.round else self.main.round + 1

    def begin_round(self, loop: Loop, index_: int | None) -> int:
        self.reap()
        frame = loop.frame
        main = frame is self.main
        again = main and self.rerun is not None and self.rerun == frame.round
        self.check_budget(frame, again)
        if main:
            self.check_stall()
            self.rerun = None  # only the first round of this process re-runs one
        if not again:
            frame.round += 1
        loop.open_round = frame.round
        loop.open_index = index_
        loop.began = time.monotonic()
        fields: dict[str, Any] = {}
        if main:
            frame.iterator = index_
            self.closed_sessions.clear()
            self.progress_value = NOTHING
            fields.update(self.moves.round_started())
            notices.close_unused(self, self.answers.round_begins(frame.round), frame.round)
            if again:
                fields["again"] = True  # SPEC §21: the round a question paused, once more
        try:
            self.log.record(
                "round_started", key=frame.key, round=frame.round, index=index_, **fields
            )
        except OSError as exc:
            # A round whose start is not in the record is not started: the next run
            # numbers its rounds from the record, and would number this one again.
            number = frame.round
            if not again:
                frame.round -= 1
            loop.open_round = None
            self.notify(
                f"warning: round {number} could not be recorded in "
                f"{self.run_dir / CYCLE} ({exc.strerror or exc}); pausing before it"
            )
            raise PauseRun from None
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
        seconds = elapsed(loop.began)
        main = frame is self.main
        # git looks while we save, in a round that counts (SPEC §20)
        status = self.moves.round_ending(self.closed_sessions) if main else None
        self.states.save()  # SPEC §5.2: changes inside values are saved at each round end
        fields: dict[str, Any] = {}
        if main:  # SPEC §20: what the round moved, the state digested after the save
            progress, self.progress_value = self.progress_value, NOTHING
            fields["moved"] = self.moves.round_ended(list(self.closed_sessions), progress, status)
            if progress is not NOTHING:
                fields["progress"] = progress
            if self.streaks is not None:
                self.streaks.round_ended(number, fields["moved"])
            if outcome == "ok":
                notices.close_unused(self, self.answers.unused(), number)
        self.log.append(
            "round_ended",
            key=frame.key,
            round=number,
            index=loop.open_index,
            outcome=outcome,
            seconds=seconds,
            **fields,
        )
        with contextlib.suppress(OSError):  # the round's end as durable as its save
            self.log.sync()
        if main:  # on a worker, a lane's branch goes to the origin (records/mirror.py)
            mirror.at_round_end(self.layout.checkout)

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

    def _folded(self) -> Any:
        return fold_run(self.layout, self.run_id, self.run_dir)  # streamed, from its cached fold
