"""Messages: facts, in the past tense, that workers and the watch post to the screen.

The core speaks plain data (``core.watch`` events, ``RunUpdate``, rows); these
carry it into Textual's message queue. The three watch messages coalesce: a
burst of changes to one run collapses into the one re-read it needs.

Those with fields are dataclasses (Textual's ``Message.__post_init__`` sets it up, so the
generated ``__init__`` needs no ``super().__init__()``); ``eq=False`` keeps a
message equal only to itself, as a message is an occurrence, not a value.
"""

from __future__ import annotations

from dataclasses import KW_ONLY, dataclass, field
from typing import Any

from textual.message import Message

from flowdrop_tui.core.records.run_record.follow import RunUpdate
from flowdrop_tui.core.records.run_record.run_info import RunInfo
from flowdrop_tui.core.records.spend.budget import Limits
from flowdrop_tui.core.run.forecast import Forecast
from flowdrop_tui.core.run.start_plan import StartPlan


@dataclass(eq=False)
class RunChanged(Message):
    """A run's record changed on disk (``core.watch.RunChanged``)."""

    run_id: str

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


@dataclass(eq=False)
class FlowRowsRead(Message):
    """The flow list was read (``described`` False: declarations still being read)."""

    rows: list[dict[str, Any]]
    described: bool


@dataclass(eq=False)
class RunsRead(Message):
    """One flow's runs were read, newest first (``total``: how many it has).
    ``older``: the next page, older than the runs already shown, to add below them."""

    key: str
    runs: list[RunInfo]
    total: int
    older: bool = False
    pinned: frozenset[str] = frozenset()


@dataclass(eq=False)
class RunPolled(Message):
    """A run was read again; ``history`` means ``update.events`` is its recent past,
    to show from scratch, rather than what was appended since the last poll."""

    update: RunUpdate
    _: KW_ONLY
    history: bool = False


@dataclass(eq=False)
class RunDetailRead(Message):
    """The selected run's state, sessions and git facts were read."""

    run_id: str
    state: dict[str, Any]
    sessions: list[dict[str, Any]]
    git: dict[str, Any] | None
    worker: str | None = None  # remote mode: the worker that runs or ran it


@dataclass(eq=False)
class WorkspaceRead(Message):
    """The workspace's git facts were read (``None``: not a git repository)."""

    git: dict[str, Any] | None


@dataclass(eq=False)
class UsageRead(Message):
    """The workspace's size was measured: runs and bytes on disk under .flowdrop/."""

    runs: int
    used: int


@dataclass(eq=False)
class PickUpPlanned(Message):
    """A launch was planned that carries state into a new run (or resumes a paused run
    that drifted): ask before it starts. ``forecast``: what ``plan`` would say."""

    key: str
    forecast: Forecast
    from_run: str | None
    limits: Limits = field(default_factory=dict)  # --max-… it goes on under (raised here)


@dataclass(eq=False)
class FreshRunPlanned(Message):
    """A fresh run was asked for while the thread has a state that could be picked up."""

    key: str
    plan: StartPlan


@dataclass(eq=False)
class RunLaunched(Message):
    """A run was started (or a paused one resumed) in the background."""

    run_id: str
    key: str
    what: str


@dataclass(eq=False)
class RunActionTaken(Message):
    """A stop or pause was asked of a run; ``text`` says what will happen."""

    run_id: str
    text: str


@dataclass(eq=False)
class RunActionRefused(Message):
    """A launch, stop, pause or resume was refused; ``text`` says why in plain words."""

    text: str
    code: str


@dataclass(eq=False)
class LanesRead(Message):
    """What ``lanes --json`` says of each lane (ahead/behind, dirty, landed), by key."""

    facts: dict[str, dict[str, Any]]

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, LanesRead)


@dataclass(eq=False)
class LandPlanned(Message):
    """``L``: the lane was found; ``into`` (its base branch) is where it would land."""

    key: str
    branch: str
    into: str | None


@dataclass(eq=False)
class LaneLanded(Message):
    """A lane was landed: ``land --json``'s answer (``lane``, ``into``, ``method``, ``commit``)."""

    landed: dict[str, Any]
