"""The run context a flow receives: ``state``, ``rounds``, ``call``, ``log`` (SPEC §3, §6)."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, NoReturn, Protocol

from flowdrop_tui.core.paths import Layout
from flowdrop_tui.core.records.flow_state.state import State
from flowdrop_tui.core.records.log.event_log import EventLog
from flowdrop_tui.core.run.frame import Frame, Loop
from flowdrop_tui.core.sessions.session_opening import SessionResult, open_session


class RunHost(Protocol):
    """What the run context asks of the run executing it (``execution.Execution``)."""

    layout: Layout
    run_id: str
    run_dir: Path
    log: EventLog
    main: Frame
    children: set[int]
    sessions_opened: int | None
    notify: Callable[[str], None]
    limit_wait: float
    closed_sessions: list[dict[str, Any]]

    @property
    def interrupts(self) -> int: ...

    @property
    def stop_requested(self) -> bool: ...

    def reap(self) -> None: ...

    def session_starting(self, backend: str) -> None: ...

    def hold(self, seconds: float) -> str | None: ...

    def leave_wait(self, asked: str) -> NoReturn: ...

    def between_rounds(self) -> None: ...

    def begin_round(self, loop: Loop, index_: int | None) -> int: ...

    def end_round(self, loop: Loop, outcome: str) -> None: ...

    def forget(self, loop: Loop) -> None: ...

    def declare_progress(self, value: Any) -> None: ...

    def call(
        self, caller: Frame, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any: ...

    def ask(self, frame: Frame, question: str, choices: list[str] | None) -> Any: ...


class RunContext:
    """What a flow's function receives as ``run``."""

    def __init__(self, host: RunHost, frame: Frame) -> None:
        self._host = host
        self._frame = frame

    # -- identity -----------------------------------------------------------
    @property
    def run_id(self) -> str:
        return self._host.run_id

    @property
    def key(self) -> str:
        return self._frame.key

    @property
    def workspace(self) -> Path:
        return self._host.layout.checkout  # a lane's worktree (SPEC §23)

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
        return self._host.stop_requested

    # -- rounds ---------------------------------------------------------------
    def rounds(self, items: Iterable[Any] | None = None) -> Iterator[Any]:
        """Yield rounds: round numbers forever, or each of ``items`` in turn.

        Each round's start and end is recorded and the state saved at its end;
        stop and pause requests are acted on between rounds, never inside one.
        The first loop after a resume continues at the saved position.
        """
        self._host.reap()
        loop = Loop(self._frame)
        # The run keeps a strong reference: if the flow's loop body raises, the
        # generator must not be closed by the unwinding (it would record the
        # round as finished) before the run has seen the exception.
        loop.gen = self._iterate(loop, items)
        self._frame.loops.append(loop)
        return loop.gen

    def _iterate(self, loop: Loop, items: Iterable[Any] | None) -> Iterator[Any]:
        frame = loop.frame
        host = self._host
        restore, frame.restore = frame.restore, None
        start = 0
        if items is not None and restore and isinstance(restore.get("iterator"), int):
            start = restore["iterator"]
        source: Iterator[Any] = (
            itertools.islice(iter(items), start, None) if items is not None else itertools.count()
        )
        index = start
        if items is not None and frame is host.main:
            frame.iterator = start
        try:
            for item in source:
                host.between_rounds()
                number = host.begin_round(loop, index if items is not None else None)
                try:
                    yield item if items is not None else number
                except GeneratorExit:
                    host.end_round(loop, "ok")  # left with break or return
                    raise
                host.end_round(loop, "ok")
                index += 1
        finally:
            host.forget(loop)

    # -- calls, sessions, log ------------------------------------------------------
    def call(self, name: str, *args: Any, **kwargs: Any) -> Any:
        """Run another flow inside this run under its own key; returns its result."""
        self._host.reap()
        return self._host.call(self._frame, name, args, kwargs)

    def session(self, backend: str, prompt_or_argv: Any, **options: Any) -> SessionResult:
        """Open a session with a backend (``command``, ``claude``, ``codex``, …)."""
        self._host.reap()
        return open_session(self._host, self._frame, backend, prompt_or_argv, **options)

    def progress(self, value: Any) -> None:
        """Declare how far the loop has got (SPEC §20): a value that moves when the
        round made progress git and the state cannot see (a queue's length, a remote
        job's status). A round whose HEAD, tree, state and progress value are all as
        before changed nothing; ``@flow(stall=N)`` such rounds in a row pause the run
        (rounds that opened an agent session; every round with ``stall_on="all"``).
        Recorded in the round's ``round_ended`` (``progress``); the last value declared
        holds until another is."""
        self._host.reap()
        self._host.declare_progress(value)

    def ask(self, question: str, choices: Iterable[Any] | None = None) -> str:
        """Ask a person (SPEC §21): the run pauses with the question open and its process
        exits; ``flowdrop-tui answer RUN ANSWER`` resumes it, the round that asked runs
        again from its start, and this call returns the answer. Code before ``ask`` in
        that round runs again: keep it idempotent. ``choices``: the answers allowed."""
        self._host.reap()
        listed = None if choices is None else [str(choice) for choice in choices]
        if listed is not None and not listed:
            raise ValueError("run.ask: choices must name at least one answer (or be None)")
        answer: str = self._host.ask(self._frame, str(question), listed)
        return answer

    def log(self, message: str, **fields: Any) -> None:
        """Record an event in ``cycle.jsonl``."""
        self._host.reap()
        self._host.log.append("log", key=self._frame.key, message=str(message), fields=fields)

    def __repr__(self) -> str:
        return f"<run {self.run_id} key={self.key!r} round={self.round}>"
