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
``Session``, ``BackendUnavailableError``, and ``Usage`` (what a session spent,
which a backend may report in its ``Reply``).
"""

from __future__ import annotations

from flowdrop_tui.core.errors import BackendUnavailableError
from flowdrop_tui.core.records.spend.usage import Usage, read_usage
from flowdrop_tui.core.sessions.base import Backend, Reply
from flowdrop_tui.core.sessions.registry import ENTRY_POINT_GROUP, available, get_backend, register
from flowdrop_tui.core.sessions.session import Session, open_file_exclusive
from flowdrop_tui.core.sessions.session_opening import SessionResult, open_session

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
