"""The run context a flow receives: ``state``, ``rounds``, ``call``, ``log`` (SPEC §3, §6)."""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .state import State

if TYPE_CHECKING:
    from .execution import Execution


class StopRun(BaseException):
    """Raised between rounds when a stop was asked for: the run ends ``cancelled``.

    A ``BaseException`` so a flow's ``except Exception`` cannot swallow it.
    """


class PauseRun(BaseException):
    """Raised between rounds when a pause was asked for: the run saves and exits ``paused``."""


@dataclass(eq=False)
class Loop:
    """One ``rounds()`` loop in flight, and the round it has open."""

    frame: Frame
    gen: Iterator[Any] | None = None
    open_round: int | None = None
    open_index: int | None = None
    began: float = 0.0


@dataclass(eq=False)
class Frame:
    """One key's part of a run: the main flow, or a flow it called."""

    key: str
    flow: str
    state: State
    first_round: int
    round: int  # last round started in this key's chain
    restore: dict[str, Any] | None = None  # execution position for the first loop (resume)
    finished: int = 0  # rounds finished in this run (iterationCount, for the main frame)
    iterator: int | None = None
    loops: list[Loop] = field(default_factory=list)

    @property
    def open_round(self) -> int | None:
        """The innermost round in flight in this frame, if any."""
        for loop in reversed(self.loops):
            if loop.open_round is not None:
                return loop.open_round
        return None


class RunContext:
    """What a flow's function receives as ``run``."""

    def __init__(self, execution: Execution, frame: Frame) -> None:
        self._execution = execution
        self._frame = frame

    # -- identity -----------------------------------------------------------
    @property
    def run_id(self) -> str:
        return self._execution.run_id

    @property
    def key(self) -> str:
        return self._frame.key

    @property
    def workspace(self) -> Path:
        return self._execution.layout.workspace

    @property
    def state(self) -> State:
        """This flow's own dict, saved whenever a key is set or deleted."""
        return self._frame.state

    @property
    def round(self) -> int:
        """The round in flight, or the last one started (0 before the thread's first)."""
        return self._frame.round

    @property
    def stop_requested(self) -> bool:
        """True once a stop was asked for: a flow with long rounds may end one early."""
        return self._execution.stop_requested

    # -- rounds ---------------------------------------------------------------
    def rounds(self, items: Iterable[Any] | None = None) -> Iterator[Any]:
        """Yield rounds: round numbers forever, or each of ``items`` in turn.

        Each round's start and end is recorded and the state saved at its end;
        stop and pause requests are acted on between rounds, never inside one.
        The first loop after a resume continues at the saved position.
        """
        self._execution.reap()
        loop = Loop(self._frame)
        # The run keeps a strong reference: if the flow's loop body raises, the
        # generator must not be closed by the unwinding (it would record the
        # round as finished) before the run has seen the exception.
        loop.gen = self._iterate(loop, items)
        self._frame.loops.append(loop)
        return loop.gen

    def _iterate(self, loop: Loop, items: Iterable[Any] | None) -> Iterator[Any]:
        frame = loop.frame
        execution = self._execution
        restore, frame.restore = frame.restore, None
        start = 0
        if items is not None and restore and isinstance(restore.get("iterator"), int):
            start = restore["iterator"]
        source: Iterator[Any] = (
            itertools.islice(iter(items), start, None) if items is not None else itertools.count()
        )
        index = start
        if items is not None and frame is execution.main:
            frame.iterator = start
        try:
            for item in source:
                execution.between_rounds()
                number = execution.begin_round(loop, index if items is not None else None)
                try:
                    yield item if items is not None else number
                except GeneratorExit:
                    execution.end_round(loop, "ok")  # left with break or return
                    raise
                execution.end_round(loop, "ok")
                index += 1
        finally:
            execution.forget(loop)

    # -- calls, sessions, log ------------------------------------------------------
    def call(self, name: str, *args: Any, **kwargs: Any) -> Any:
        """Run another flow inside this run under its own key; returns its result."""
        self._execution.reap()
        return self._execution.call(self._frame, name, args, kwargs)

    def session(self, backend: str, prompt_or_argv: Any, **options: Any) -> Any:
        """Open a session with a backend (``command``, ``claude``, ``codex``, …)."""
        from .sessions import open_session

        self._execution.reap()
        return open_session(self._execution, self._frame, backend, prompt_or_argv, **options)

    def log(self, message: str, **fields: Any) -> None:
        """Record an event in ``cycle.jsonl``."""
        self._execution.reap()
        self._execution.log.append("log", key=self._frame.key, message=str(message), fields=fields)

    def __repr__(self) -> str:
        return f"<run {self.run_id} key={self.key!r} round={self.round}>"


def elapsed(since: float) -> float:
    return round(time.monotonic() - since, 3)
