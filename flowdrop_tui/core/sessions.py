"""Sessions with backends; each links its transcript into the run's ``sessions/`` (SPEC §9).

A session is always opened, never reopened: the conversation does not come
back on pick-up. The run's record holds a link to the backend's own transcript,
never a second copy of it.

The split of work: a *backend* (``command``, ``claude``, ``codex``, or one
plugged in through the ``flowdrop_tui.backends`` entry-point group) knows what
to run and where its transcript lands; the :class:`Session` handle it is given
does the rest the same way for every backend — the ``session_opened`` and
``session_closed`` events, the numbered link in ``sessions/``, starting
processes in the run's process group (so Ctrl-C and ``stop --now`` reach them)
and waiting for them in a way an interrupt cannot leave half-recorded.

This module is what a backend author imports: ``Backend``, ``Reply``,
``Session``, ``BackendUnavailableError``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .backends.base import Backend, BackendUnavailableError, Reply
from .backends.registry import ENTRY_POINT_GROUP, available, get_backend, register
from .backends.session import Session, open_file_exclusive
from .backends.usage import Usage, read_usage

if TYPE_CHECKING:
    from .execution import Execution
    from .runtime import Frame

__all__ = [
    "ENTRY_POINT_GROUP",
    "Backend",
    "BackendUnavailableError",
    "Reply",
    "Session",
    "SessionResult",
    "Usage",
    "available",
    "get_backend",
    "open_file_exclusive",
    "open_session",
    "read_usage",
    "register",
]


@dataclass
class SessionResult:
    """What ``run.session(...)`` gives back to the flow."""

    backend: str
    session: str
    exit_code: int
    text: str
    transcript: Path | None
    seconds: float
    interrupted: bool = False
    link: Path | None = None
    error: str | None = None
    usage: Usage | None = None  # tokens in and out, when the backend tells

    @property
    def ok(self) -> bool:
        """It ran to its end and succeeded: exit 0 and not interrupted (an agent CLI
        stopped by Ctrl-C may well exit 0)."""
        return self.exit_code == 0 and not self.interrupted


def open_session(
    execution: Execution, frame: Frame, backend: str, prompt_or_argv: Any, **options: Any
) -> SessionResult:
    """Open a session with ``backend``; returns its result (exit code, text, transcript)."""
    chosen = get_backend(backend)
    session = Session(execution, frame, chosen.name)
    reply: Reply | None = None
    error: str | None = None
    seconds = 0.0
    try:
        reply = chosen.run(session, prompt_or_argv, dict(options))
        if not session.opened:  # a backend that ran nothing still opened a session
            session.open()
    except KeyboardInterrupt:
        session.interrupted = True
        raise
    except BaseException as exc:
        error = str(exc) or type(exc).__name__
        raise
    finally:
        if session.opened:
            seconds = session.close(
                reply.exit_code if reply is not None else session.exit_code,
                _error(session, reply, error),
                _reported_usage(reply),
            )
    assert reply is not None
    return SessionResult(
        backend=session.backend,
        session=session.id,
        exit_code=reply.exit_code,
        text=reply.text,
        transcript=session.target,
        seconds=seconds,
        interrupted=session.interrupted,
        link=session.link_path if session.target is not None else None,
        error=_error(session, reply, None),
        usage=session.usage,
    )


def _error(session: Session, reply: Reply | None, raised: str | None) -> str | None:
    """Why the session did not succeed: for one the run interrupted, that first (the
    CLI's own words after a Ctrl-C are beside the point, or missing: Claude Code exits
    0 with no answer), then what the backend said."""
    error = reply.error if reply is not None else raised
    if session.interrupted:
        stopped = "interrupted (Ctrl-C or stop --now)"
        return f"{stopped}; {error}" if error and error != "KeyboardInterrupt" else stopped
    return error


def _reported_usage(reply: Reply | None) -> Usage | None:
    """A backend's own report of its usage: a :class:`Usage`, or its JSON shape."""
    if reply is None or reply.usage is None:
        return None
    if isinstance(reply.usage, Usage):
        return reply.usage
    return Usage.from_json(reply.usage)
