"""A run as its record describes it (``RunInfo``), and the statuses it can be in.

``run_fold`` builds one from a record's events.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import Any

from flowdrop_tui.core.records.spend.budget import ChainBudget, Limits, Used, between
from flowdrop_tui.core.records.spend.progress import Streaks
from flowdrop_tui.core.records.spend.usage import Usage
from flowdrop_tui.core.records.spend.usage import total as usage_total
from flowdrop_tui.core.times import now_iso, parse_time


class Status(StrEnum):
    PENDING = "pending"
    RUNNING = "running"
    PAUSED = "paused"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"
    INTERRUPTED = "interrupted"


TERMINAL = frozenset({Status.COMPLETED, Status.FAILED, Status.CANCELLED})
ENDED = TERMINAL | {Status.INTERRUPTED}
LIVE = frozenset({Status.PENDING, Status.RUNNING})


def clean_position(value: Any) -> dict[str, Any]:
    """A recorded ``position``, each field kept only when it has the right type."""
    position = {"currentNodeId": "", "iterationCount": 0, "iterator": None}
    if isinstance(value, dict):
        node = value.get("currentNodeId")
        count = value.get("iterationCount")
        iterator = value.get("iterator")
        if isinstance(node, str):
            position["currentNodeId"] = node
        if isinstance(count, int) and not isinstance(count, bool) and count >= 0:
            position["iterationCount"] = count
        if isinstance(iterator, int) and not isinstance(iterator, bool) and iterator >= 0:
            position["iterator"] = iterator
    return position


@dataclass
class RunInfo:
    """What a run's record says, folded from its events."""

    run: str
    path: Path
    key: str | None = None
    flow: str | None = None
    recorded: Status = Status.PENDING
    status: Status = Status.PENDING
    start: str | None = None
    source: str | None = None
    snapshot: str | None = None
    first_round: int = 1
    last_round: int | None = None
    rounds: int = 0
    started: str | None = None
    ended: str | None = None
    last_event: str | None = None  # the ``t`` of the last whole event read
    result: Any = None
    error: Any = None
    pid: int | None = None
    resumable: bool | None = None
    git_start: dict[str, Any] | None = None
    git_end: dict[str, Any] | None = None
    position: dict[str, Any] = field(default_factory=lambda: clean_position(None))
    carried: dict[str, Any] = field(default_factory=dict)
    key_rounds: dict[str, int] = field(default_factory=dict)
    called: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    pause_pending: bool = False
    stop_pending: bool = False
    stop_now: bool = False
    sessions: list[dict[str, Any]] = field(default_factory=list)
    # What each key's chain had spent before this run took it up (``chain_usage`` of
    # ``created`` and of a key's first ``call_started``); a key with none: nothing.
    chain_before: dict[str, Usage | None] = field(default_factory=dict)
    events: int = 0
    has_created: bool = False
    live_pid: int | None = None
    # SPEC §14/§15: budgets and drift, folded from created/resumed/paused/ended
    budget_limits: Limits = field(default_factory=dict)  # in effect (latest start)
    budget_overrides: Limits = field(default_factory=dict)  # --max-… given along the chain
    budget_carried: Used = field(default_factory=Used)  # the chain's totals before this run
    budget_reached: dict[str, Any] | None = None  # why it paused, until it is resumed
    tokens: int = 0  # what its closed sessions reported
    run_seconds: float = 0.0  # running time of its finished stretches
    running_since: str | None = None  # the ``t`` its current stretch began
    flow_digest: str | None = None  # of the flow folder it last started with
    git_last: dict[str, Any] | None = None  # the latest git facts its record holds
    # SPEC §19: a usage-limit wait in progress ({"backend", "until", "next_probe",
    # "since"}), the seconds spent waiting (no budget counts them), why it paused
    waiting: dict[str, Any] | None = None
    waited_seconds: float = 0.0
    limit_reached: dict[str, Any] | None = None
    # SPEC §20: the chain's streaks of rounds without a change / failing the same way,
    # and why the run last paused (``budget``, ``stalled``, ``same_failure``, ``request``)
    streaks: Streaks = field(default_factory=Streaks)
    pause_reason: dict[str, Any] | None = None
    # SPEC §21: every gate the run opened, by id ({"gate", "question", "choices", "key",
    # "round", "ask", "in_round", "opened", "status": "open"|"answered"|"closed",
    # "answer", "by"}); the answers of the round that asked, each with what ties it to
    # its ``ask`` ({"gate", "answer", "question", "key", "ask", "in_round"}), returned
    # while that round re-runs (cleared when a round of the run's key ends ok); the
    # round of the run's key a resume runs again (the one a question paused, until it
    # ends ok); the processes that held it ({pid, pgid, sid, start}), for refusing a
    # self-answer; how many took it (started + resumed); what paused it last ({"event",
    # "t", …}: budget_reached, limit_reached, gate_opened, stalled, same_failure), until
    # it is resumed.
    gates: dict[str, dict[str, Any]] = field(default_factory=dict)
    gate_answers: list[dict[str, Any]] = field(default_factory=list)
    rerun_round: int | None = None
    holders: list[dict[str, Any]] = field(default_factory=list)
    stretch: int = 0
    pause_cause: dict[str, Any] | None = None
    # SPEC §5.3: per state value, how many saves left it out (``state_refused`` of the
    # last ``paused``/``ended``): warned of twice, then counted
    state_refused: dict[str, int] = field(default_factory=dict)

    @property
    def round(self) -> int:
        """The last round started in this run's chain for its key (0 before any)."""
        return self.last_round if self.last_round is not None else self.first_round - 1

    @property
    def next_round(self) -> int:
        """The round a resume of this run starts: the round a question paused, again
        (SPEC §21), else the next one."""
        return self.round if self.rerun_round == self.round else self.round + 1

    @property
    def stopped_at(self) -> str | None:
        """When the run stopped running: its recorded end; for a paused or interrupted run,
        which recorded none, its last event; ``None`` while it is live."""
        if self.ended is not None:
            return self.ended
        return None if self.status in LIVE else self.last_event

    def seconds(self, now: datetime | None = None) -> float | None:
        """How long it ran: from its start to ``stopped_at`` — fixed once it has stopped —
        or, while it is live, to ``now``. None when its start is unknown."""
        begin = parse_time(self.started)
        if begin is None:
            return None
        stopped = self.stopped_at
        finish = parse_time(stopped) if stopped is not None else now or datetime.now(UTC)
        if finish is None:
            return None
        return round(max(0.0, (finish - begin).total_seconds()), 3)

    @property
    def usage(self) -> Usage | None:
        """What the run's closed sessions spent, as recorded when each closed (SPEC §14);
        ``None`` when none reported usage."""
        return usage_total(
            Usage.from_json((s.get("closed") or {}).get("usage")) for s in self.sessions
        )

    def usage_of(self, key: str) -> Usage | None:
        """What the closed sessions opened under ``key`` in this run spent."""
        return usage_total(
            Usage.from_json((s.get("closed") or {}).get("usage"))
            for s in self.sessions
            if s.get("key") == key
        )

    def summary(self) -> dict[str, Any]:
        """The fields of ``runs --json`` (SPEC §11), ``duration`` (seconds, see ``seconds``)
        and ``usage``."""
        usage = self.usage
        return {
            "run": self.run,
            "flow": self.key,
            "status": str(self.status),
            "rounds": self.rounds,
            "first_round": self.first_round,
            "last_round": self.last_round,
            "started": self.started,
            "ended": self.ended,
            "picked_up_from": self.source,
            "start": self.start,
            "duration": self.seconds(),
            "budget": self.chain_budget().to_json(),
            "usage": usage.to_json() if usage is not None else None,
            "waiting": self.waiting_now,
            "paused_by": self.paused_by,
            "gate": self.open_gate,
        }

    @property
    def open_gate(self) -> dict[str, Any] | None:
        """SPEC §21: the question a paused run waits on (``{"id", "question", "choices",
        "key", "round", "opened"}``), else ``None``."""
        if self.status != Status.PAUSED:
            return None
        for gate in reversed(self.gates.values()):
            if gate.get("status") == "open":
                return {
                    "id": gate["gate"],
                    **{k: gate.get(k) for k in ("question", "choices", "key", "round", "opened")},
                }
        return None

    @property
    def waiting_now(self) -> dict[str, Any] | None:
        """SPEC §19: the usage-limit wait of a running run, else ``None`` (a run killed
        while it waited is interrupted, not waiting)."""
        if self.status != Status.RUNNING or self.waiting is None:
            return None
        shown = {k: self.waiting.get(k) for k in ("backend", "until", "next_probe", "since")}
        return {**shown, "inside": bool(self.waiting.get("inside"))}

    def waited(self, now: str | None = None) -> float:
        """Seconds spent waiting for usage limits, the wait in progress included."""
        seconds = self.waited_seconds
        if self.waiting is not None:
            since = self.waiting.get("since")
            end = (now or now_iso()) if self.status in LIVE else self.last_event
            seconds += between(since, end)
        return seconds

    @property
    def paused_by(self) -> dict[str, Any] | None:
        """Why a paused run paused (docs/records.md, "Progress"); ``None`` unless paused."""
        return self.pause_reason if self.status == Status.PAUSED else None

    def own_used(self, now: str | None = None) -> Used:
        """What this run used itself: rounds it started, its running time (a stretch still
        open counts to ``now`` while it is live, else to its last event, as after a
        kill) less its usage-limit waits, the tokens its closed sessions reported."""
        seconds = self.run_seconds
        if self.running_since is not None:
            end = (now or now_iso()) if self.status in LIVE else self.last_event
            seconds += between(self.running_since, end)
        # SPEC §19: time spent waiting for a usage limit counts toward no budget
        seconds = max(0.0, seconds - self.waited(now))
        return Used(self.rounds, seconds, self.tokens)

    def chain_budget(self, now: str | None = None) -> ChainBudget:
        """The limits this run ran under and what its chain had used by its end (or now)."""
        return ChainBudget(dict(self.budget_limits), self.budget_carried + self.own_used(now))
