"""Opening a session for a flow: ``run.session(...)`` and the result it gives back."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from flowdrop_tui.core.sessions.base import Reply
from flowdrop_tui.core.sessions.host import SessionFrame, SessionHost
from flowdrop_tui.core.sessions.registry import get_backend
from flowdrop_tui.core.sessions.session import Session


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

    @property
    def ok(self) -> bool:
        return self.exit_code == 0


def open_session(
    host: SessionHost, frame: SessionFrame, backend: str, prompt_or_argv: Any, **options: Any
) -> SessionResult:
    """Open a session with ``backend``; returns its result (exit code, text, transcript)."""
    chosen = get_backend(backend)
    session = Session(host, frame, chosen.name)
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
                reply.error if reply is not None else error,
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
        error=reply.error,
    )
