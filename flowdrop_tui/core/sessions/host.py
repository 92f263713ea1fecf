"""What a session needs from the run it belongs to: a small seam, so sessions never
import the run machinery (``run.execution.Execution`` satisfies both protocols)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

from flowdrop_tui.core.paths import Layout
from flowdrop_tui.core.records.event_log import EventLog


class SessionHost(Protocol):
    """The run: where its record is, its event log, the processes it started."""

    layout: Layout
    run_id: str
    run_dir: Path
    log: EventLog
    children: set[int]  # session processes, for passing an interrupt on
    sessions_opened: int | None  # sessions this run has opened; None until first counted
    # How each session closed ({session, exit_code, error}), for the round's end to
    # digest (SPEC §20); the run empties it as each of its rounds begins.
    closed_sessions: list[dict[str, Any]]

    @property
    def interrupts(self) -> int:
        """SIGINTs this run has taken so far: one arriving while a session's process
        runs means the run interrupted that session, whatever its exit code."""
        ...


class SessionFrame(Protocol):
    """The flow (key) the session is opened from, and its round in flight."""

    @property
    def key(self) -> str: ...

    @property
    def open_round(self) -> int | None: ...
