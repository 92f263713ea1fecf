"""The backend seam: what a backend is, what it returns, and how it says it cannot run."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from flowdrop_tui.core.records.spend.usage import Usage

if TYPE_CHECKING:
    from flowdrop_tui.core.sessions.session import Session


@dataclass
class Reply:
    """What a backend's ``run`` returns: the exit code and the final text.

    ``usage`` is what the session spent, when the backend knows it (a plugged-in
    backend talking to an API); left ``None``, the built-in readers take it from
    the transcript (``claude``, ``codex``) or there is none (``command``).
    """

    exit_code: int
    text: str
    error: str | None = None  # why it failed, when the backend knows (stderr, an error event)
    usage: Usage | dict[str, int] | None = None  # a dict: the shape of Usage.to_json()
    # SPEC §19: the account's usage limit ended it — a ``Limited``, or its JSON shape
    # ``{"until": ISO time | None, "source": "..."}``; ``None``: it was not limited.
    limited: Any = None


@runtime_checkable
class Backend(Protocol):
    """A session backend. ``run`` opens the session through ``session`` and returns a
    :class:`Reply`; raising before ``session.open``/``spawn`` records nothing."""

    name: str

    def run(self, session: Session, prompt_or_argv: Any, options: dict[str, Any]) -> Reply: ...
