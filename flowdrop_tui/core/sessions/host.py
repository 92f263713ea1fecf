"""What a session needs from the run it belongs to: a small seam, so sessions never
import the run machinery (``run.execution.Execution`` satisfies both protocols)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn, Protocol

from flowdrop_tui.core.paths import Layout
from flowdrop_tui.core.records.log.event_log import EventLog


class SessionHost(Protocol):
    """The run: where its record is, its event log, the processes it started."""

    layout: Layout
    run_id: str
    run_dir: Path
    log: EventLog
    children: set[int]  # session processes, for passing an interrupt on
    sessions_opened: int | None  # sessions this run has opened; None until first counted
    # How each session closed ({session, exit_code, error, agent}), for the round's end
    # to digest (SPEC §20); the run empties it as each of its rounds begins.
    closed_sessions: list[dict[str, Any]]

    notify: Callable[[str], None]  # a line for whoever watches the run (its stderr)
    limit_wait: float  # SPEC §19: the longest one wait for a usage limit, in seconds

    @property
    def interrupts(self) -> int:
        """SIGINTs this run has taken so far: one arriving while a session's process
        runs means the run interrupted that session, whatever its exit code."""
        ...

    def session_starting(self, backend: str) -> None:
        """A session of ``backend`` is about to start (SPEC §20: what its round is
        compared with is taken now, for a backend that may count)."""
        ...

    def hold(self, seconds: float) -> str | None:
        """Wait up to ``seconds``, taking requests as they come: ``"stop"`` or ``"pause"``
        as soon as one is asked for (the wait is over), else ``None``."""
        ...

    def leave_wait(self, asked: str) -> NoReturn:
        """End the run (``"stop"``) or pause it (``"pause"``) from inside a wait, at once."""
        ...


class SessionFrame(Protocol):
    """The flow (key) the session is opened from, and its round in flight."""

    @property
    def key(self) -> str: ...

    @property
    def open_round(self) -> int | None: ...
