"""Messages: facts, in the past tense, that workers and the watch post to the screen.

The core speaks plain data (``core.watch`` events, ``RunUpdate``, rows); these
carry it into Textual's message queue. The three watch messages coalesce: a
burst of changes to one run collapses into the one re-read it needs.
"""

from __future__ import annotations

from typing import Any

from textual.message import Message

from flowdrop_tui.core.records.events import RunInfo
from flowdrop_tui.core.records.follow import RunUpdate
from flowdrop_tui.core.run.forecast import Forecast
from flowdrop_tui.core.run.plan import StartPlan


class RunChanged(Message):
    """A run's record changed on disk (``core.watch.RunChanged``)."""

    def __init__(self, run_id: str) -> None:
        super().__init__()
        self.run_id = run_id

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, RunChanged) and message.run_id == self.run_id


class FlowsChanged(Message):
    """Something under ``flows/`` changed."""

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, FlowsChanged)


class IndexChanged(Message):
    """``.flowdrop/index.json`` changed."""

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, IndexChanged)


class FlowRowsRead(Message):
    """The flow list was read (``described`` False: declarations still being read)."""

    def __init__(self, rows: list[dict[str, Any]], described: bool) -> None:
        super().__init__()
        self.rows = rows
        self.described = described


class RunsRead(Message):
    """One flow's runs were read, newest first (``total``: how many it has).
    ``older``: the next page, older than the runs already shown, to add below them."""

    def __init__(
        self,
        key: str,
        runs: list[RunInfo],
        total: int,
        older: bool = False,
        pinned: frozenset[str] = frozenset(),
    ) -> None:
        super().__init__()
        self.key = key
        self.runs = runs
        self.total = total
        self.older = older
        self.pinned = pinned


class RunPolled(Message):
    """A run was read again; ``history`` means ``update.events`` is its recent past,
    to show from scratch, rather than what was appended since the last poll."""

    def __init__(self, update: RunUpdate, *, history: bool = False) -> None:
        super().__init__()
        self.update = update
        self.history = history


class RunDetailRead(Message):
    """The selected run's state, sessions and git facts were read."""

    def __init__(
        self,
        run_id: str,
        state: dict[str, Any],
        sessions: list[dict[str, Any]],
        git: dict[str, Any] | None,
    ) -> None:
        super().__init__()
        self.run_id = run_id
        self.state = state
        self.sessions = sessions
        self.git = git


class WorkspaceRead(Message):
    """The workspace's git facts were read (``None``: not a git repository)."""

    def __init__(self, git: dict[str, Any] | None) -> None:
        super().__init__()
        self.git = git


class UsageRead(Message):
    """The workspace's size was measured: runs and bytes on disk under .flowdrop/."""

    def __init__(self, runs: int, used: int) -> None:
        super().__init__()
        self.runs = runs
        self.used = used


class PickUpPlanned(Message):
    """A launch was planned that carries state into a new run (or resumes a paused run
    that drifted): ask before it starts. ``forecast``: what ``plan`` would say."""

    def __init__(self, key: str, forecast: Forecast, from_run: str | None) -> None:
        super().__init__()
        self.key = key
        self.forecast = forecast
        self.from_run = from_run


class FreshRunPlanned(Message):
    """A fresh run was asked for while the thread has a state that could be picked up."""

    def __init__(self, key: str, plan: StartPlan) -> None:
        super().__init__()
        self.key = key
        self.plan = plan


class RunLaunched(Message):
    """A run was started (or a paused one resumed) in the background."""

    def __init__(self, run_id: str, key: str, what: str) -> None:
        super().__init__()
        self.run_id = run_id
        self.key = key
        self.what = what


class RunActionTaken(Message):
    """A stop or pause was asked of a run; ``text`` says what will happen."""

    def __init__(self, run_id: str, text: str) -> None:
        super().__init__()
        self.run_id = run_id
        self.text = text


class RunActionRefused(Message):
    """A launch, stop, pause or resume was refused; ``text`` says why in plain words."""

    def __init__(self, text: str, code: str) -> None:
        super().__init__()
        self.text = text
        self.code = code
