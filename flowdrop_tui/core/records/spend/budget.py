"""Budgets (SPEC §14): the limits a chain runs under and what it has used, from records.

A chain is a run and the runs it was picked up from, back to its fresh start.
What it has used is never kept in a counter a kill could lose: each run's
``created`` event carries the totals of the chain before it (``carried``), and
the run's own share is folded from its events — rounds it started, the time
between ``started``/``resumed`` and ``paused``/``ended`` (its last event, when
it was killed), and the tokens its closed sessions reported. So the count after
a ``kill -9`` is what the record says, exactly.

The limits in effect are the flow's declared ``budget`` (read from the flow as it
is today) under the ``--max-…`` overrides given along the chain, the latest of
each kind winning; ``None`` means no limit.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

from flowdrop_tui.core.times import parse_time

KINDS = ("rounds", "minutes", "tokens")
COUNTED = ("input", "output")  # of session_closed.usage: {input, output, cache_read, cache_write}

Limits = dict[str, float | int | None]

LIMIT_WAIT = 12 * 3600.0  # SPEC §19: the longest one usage-limit wait, by default
_DURATION = re.compile(r"(\d+(?:\.\d+)?)([smhdw])")
_UNIT = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def check_limit_wait(value: Any, where: str) -> float:
    """A usage-limit wait cap (SPEC §19) as given — ``"12h"``, ``"90m"``, ``"1d12h"``, a
    number of seconds, ``0`` (never wait) — in seconds. ``ValueError`` naming ``where``."""
    if isinstance(value, str):
        spec = value.strip().lower()
        parts = _DURATION.findall(spec)
        if spec in ("0", "none", "off"):
            return 0.0
        if spec and "".join(n + u for n, u in parts) == spec:
            return sum(float(n) * _UNIT[u] for n, u in parts)
        raise ValueError(
            f"{where} takes a duration such as 12h, 90m, 1d12h or 0 (never wait), not {value!r}"
        )
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{where} takes a duration such as '12h' or seconds, not {value!r}")
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"{where} takes 0 or more seconds, not {value!r}")
    return float(value)


def check_limit(kind: str, value: Any, where: str) -> float | int | None:
    """A limit as given (declared or ``--max-…``): a positive number, whole for rounds and
    tokens; ``None`` for no limit. ``ValueError`` names ``where`` and what is wrong."""
    if kind not in KINDS:
        raise ValueError(f"{where}: unknown budget {kind!r} (budgets: {', '.join(KINDS)})")
    if value is None:
        return None
    whole = kind != "minutes"
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{where}: the {kind} budget must be a number, not {value!r}")
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"{where}: the {kind} budget must be more than 0, not {value!r}")
    if whole and value != int(value):
        raise ValueError(f"{where}: the {kind} budget must be a whole number, not {value!r}")
    return int(value) if whole else float(value)


def check_budget(budget: Any, where: str = "@flow(budget=...)") -> Limits:
    """A declared budget: ``{"rounds": N, "minutes": M, "tokens": T}``, any of them."""
    if budget is None:
        return {}
    if not isinstance(budget, dict):
        raise ValueError(f"{where} takes a dict such as {{'rounds': 50}}, not {budget!r}")
    return {str(kind): check_limit(str(kind), value, where) for kind, value in budget.items()}


def clean_limits(value: Any) -> Limits:
    """Limits read back from a record: anything malformed is left out (no limit)."""
    if not isinstance(value, dict):
        return {}
    found: Limits = {}
    for kind, limit in value.items():
        try:
            found[str(kind)] = check_limit(str(kind), limit, "record")
        except ValueError:
            continue
    return found


def effective(declared: Limits, overrides: Limits) -> Limits:
    """The limits in effect: each kind's override when one was given, else the declared."""
    return {kind: overrides[kind] if kind in overrides else declared.get(kind) for kind in KINDS}


def session_tokens(usage: Any) -> int:
    """Tokens a closed session reported (``session_closed.usage``): ``input + output``.
    In that shape (branch ``agents``, ``records/spend/usage.py``) ``input`` already includes the
    cache reads and writes, which are shown apart as parts of it: adding them again
    would count them twice (docs/decisions.md)."""
    if not isinstance(usage, dict):
        return 0
    total = 0
    for name in COUNTED:
        value = usage.get(name)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            total += value
    return total


@dataclass
class Used:
    """What a chain (or one run) has used."""

    rounds: int = 0
    seconds: float = 0.0
    tokens: int = 0

    def __add__(self, other: Used) -> Used:
        return Used(
            self.rounds + other.rounds, self.seconds + other.seconds, self.tokens + other.tokens
        )

    def of(self, kind: str) -> float | int:
        if kind == "rounds":
            return self.rounds
        if kind == "minutes":
            return round(self.seconds / 60, 2)
        return self.tokens

    def reached(self, kind: str, limit: float | int | None) -> bool:
        if limit is None:
            return False
        if kind == "minutes":
            return self.seconds >= limit * 60
        return self.of(kind) >= limit

    def to_record(self) -> dict[str, Any]:
        return {"rounds": self.rounds, "seconds": round(self.seconds, 3), "tokens": self.tokens}

    @classmethod
    def from_record(cls, value: Any) -> Used:
        if not isinstance(value, dict):
            return cls()

        def number(name: str) -> float:
            item = value.get(name)
            if isinstance(item, bool) or not isinstance(item, int | float):
                return 0.0
            return float(item) if math.isfinite(item) and item >= 0 else 0.0

        return cls(int(number("rounds")), number("seconds"), int(number("tokens")))


@dataclass
class Reached:
    """A budget that stops the next round: which, its limit, what is used."""

    budget: str
    limit: float | int
    used: float | int

    def to_json(self) -> dict[str, Any]:
        return {"budget": self.budget, "limit": self.limit, "used": self.used}


@dataclass
class ChainBudget:
    """The limits in effect for a chain and what it has used."""

    limits: Limits = field(default_factory=dict)
    used: Used = field(default_factory=Used)

    def reached(self, skip: tuple[str, ...] = ()) -> Reached | None:
        """The first budget reached, leaving out the kinds in ``skip``."""
        for kind in KINDS:
            limit = None if kind in skip else self.limits.get(kind)
            if limit is not None and self.used.reached(kind, limit):
                return Reached(kind, limit, self.used.of(kind))
        return None

    def to_json(self) -> dict[str, Any]:
        """``"budget"`` in ``--json``: per kind ``{"limit", "used", "left"}`` (``None``
        limit and left: no limit)."""
        shown: dict[str, Any] = {}
        for kind in KINDS:
            limit = self.limits.get(kind)
            used = self.used.of(kind)
            left = None if limit is None else max(0, round(limit - used, 2))
            shown[kind] = {"limit": limit, "used": used, "left": left}
        return shown


def between(start: Any, end: Any) -> float:
    """Seconds from one event's ``t`` to another's; 0 when either is unreadable."""
    begin, finish = parse_time(start), parse_time(end)
    if begin is None or finish is None:
        return 0.0
    return max(0.0, (finish - begin).total_seconds())
