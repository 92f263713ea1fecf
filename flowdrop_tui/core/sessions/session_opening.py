"""Opening a session for a flow: ``run.session(...)`` and the result it gives back."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from flowdrop_tui.core.records.spend.usage import Usage
from flowdrop_tui.core.sessions.base import Reply
from flowdrop_tui.core.sessions.host import SessionFrame, SessionHost
from flowdrop_tui.core.sessions.limit_signs import Limited
from flowdrop_tui.core.sessions.limit_wait import LimitWaits
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
    usage: Usage | None = None  # tokens in and out, when the backend tells
    # SPEC §19: ended by the account's usage limit: {"until": ISO | None, "source": ...}
    limited: dict[str, Any] | None = None

    @property
    def ok(self) -> bool:
        """It ran to its end and succeeded: exit 0 and not interrupted (an agent CLI
        stopped by Ctrl-C may well exit 0)."""
        return self.exit_code == 0 and not self.interrupted


def open_session(
    host: SessionHost, frame: SessionFrame, backend: str, prompt_or_argv: Any, **options: Any
) -> SessionResult:
    """Open a session with ``backend``; returns its result (exit code, text, transcript).

    SPEC §19: while the backend's usage-limit window is closed it waits without
    calling; a session ended by the limit is waited out and followed by a new one
    with the same prompt and options (unless the run's ``limit_wait`` is 0: the
    limited result is the flow's)."""
    chosen = get_backend(backend)
    host.session_starting(chosen.name)
    waits = LimitWaits(host, frame, chosen.name)
    own = None
    last: str | None = None
    while True:
        waits.before_call(own, last)
        began = datetime.now(UTC)
        result = _open_once(host, frame, chosen, prompt_or_argv, options)
        if result.limited is None:
            if result.ok:
                waits.cleared(began)
            return result
        limited = Limited.from_json(result.limited)
        assert limited is not None
        own = waits.record(limited, result.session)
        last = result.session
        if waits.handing_over:
            return result


def _open_once(
    host: SessionHost, frame: SessionFrame, chosen: Any, prompt_or_argv: Any, options: Any
) -> SessionResult:
    session = Session(host, frame, chosen.name)
    reply: Reply | None = None
    error: str | None = None
    seconds = 0.0
    limited: Limited | None = None
    try:
        reply = chosen.run(session, prompt_or_argv, dict(options))
        if not session.opened:  # a backend that ran nothing still opened a session
            session.open()
        limited = None if session.interrupted else Limited.from_json(reply.limited)
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
                limited.to_json() if limited is not None else None,
                said=reply.text if reply is not None else None,
            )
    assert reply is not None
    if session.leaving is not None:  # stopped or paused during a wait inside the session
        host.leave_wait(session.leaving)
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
        limited=limited.to_json() if limited is not None else None,
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
