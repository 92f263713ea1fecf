"""SPEC §20: what each round moved, and the two streaks that pause a loop that spins.

The run's process records, in each of its own rounds' ``round_ended``, what moved
(``moved``: HEAD, a digest of the working tree, of the state, of each session's
outcome, the progress value's digest, and ``changed``: what differed from just
before the round). Everything here is folded from those records, never kept in a
counter a kill could lose:

- **no change**: the rounds in a row whose ``changed`` was empty, among the rounds that
  count (``moved.counted``: an agent session opened, or ``stall_on="all"``); a round
  that does not count neither adds to it nor ends it;
- **same failure**: the rounds in a row whose failed sessions had the same outcome
  digest (``failure``), every session kind; a round with no failed session ends it.

A pick-up carries both streaks (``created.progress``, from the source run's record
folded to its end), a ``resumed`` (a person's) empties them, and so does a run that
completed (a new run after it starts a new streak).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from typing import Any

import orjson

DEFAULT_STALL = 5
COMPARED = ("head", "tree", "state", "progress")  # what a round is compared on
# The backends that spend tokens: a round that opened one counts toward ``stalled``
# (a plug-in backend counts when it reports usage).
AGENT_BACKENDS = frozenset({"claude", "codex"})
STALL_ON = ("agent", "all")  # @flow(stall_on=...): the rounds that count; "agent" default

# Error text that differs between two identical failures: a request id, a uuid, a
# long hex token, a time. Left out of the digest so "the same way" is the same.
_NOISE = re.compile(
    r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b"
    r"|\b(?=[0-9a-f]*\d)[0-9a-f]{16,}\b"
    r"|\b(?:req|msg|request|toolu|resp)_[A-Za-z0-9]{8,}\b"
    r"|\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:?\d\d)?",
    re.IGNORECASE,
)


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:32]


def value_digest(value: Any) -> str:
    """A JSON value's digest (keys sorted; what JSON cannot hold, as its text)."""
    try:
        raw = orjson.dumps(
            value, default=str, option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS
        )
    except (TypeError, orjson.JSONEncodeError):  # nested too deeply, a key that will not sort
        raw = repr(value).encode(errors="replace")
    return digest(raw)


def outcome_digest(exit_code: int | None, error: str | None) -> str:
    """A session's outcome: its exit code and its error text, noise left out."""
    text = _NOISE.sub("…", error or "")
    return digest(orjson.dumps([exit_code, text]))


def check_stall(value: Any, where: str = "@flow(stall=...)") -> int | None:
    """``stall=N`` as declared: a whole number, 1 or more; ``None`` turns it off."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{where} takes a whole number of rounds, 1 or more, or None")
    return value


def check_stall_on(value: Any, where: str = "@flow(stall_on=...)") -> str:
    """``stall_on`` as declared: ``"agent"`` (the default) or ``"all"``."""
    if not isinstance(value, str) or value not in STALL_ON:
        raise ValueError(f'{where} takes "agent" or "all", not {value!r}')
    return value


@dataclass
class Streaks:
    """Where the two streaks stand after the rounds folded so far (this run's key)."""

    unchanged: list[int] = field(default_factory=list)  # rounds in a row with no change
    failed: list[int] = field(default_factory=list)  # rounds in a row, same failure
    failure: dict[str, Any] | None = None  # {digest, exit_code, error} of that failure
    progress: str | None = None  # the digest of the last ``run.progress`` value declared

    def round_ended(self, number: int, moved: Any) -> None:
        if not isinstance(moved, dict):
            return  # a round recorded before §20, or by a called flow: not counted
        if isinstance(moved.get("progress"), str):
            self.progress = moved["progress"]
        changed = moved.get("changed")
        if moved.get("counted") is False:
            pass  # no agent session: neither counted nor the end of the streak
        elif isinstance(changed, list) and not changed:
            self.unchanged.append(number)
        else:
            self.unchanged = []
        failure = moved.get("failure")
        if isinstance(failure, dict) and isinstance(failure.get("digest"), str):
            if self.failure is None or self.failure.get("digest") != failure["digest"]:
                self.failed = []
            self.failure = {k: failure.get(k) for k in ("digest", "exit_code", "error")}
            self.failed.append(number)
        else:
            self.failed, self.failure = [], None

    def reset(self) -> None:
        """A person resumed the run, or it completed: both streaks begin again (the
        progress value stays: it is what the next round is compared with)."""
        self.unchanged, self.failed, self.failure = [], [], None

    def to_record(self) -> dict[str, Any]:
        """``created.progress``: what a pick-up carries on."""
        return {
            "unchanged": self.unchanged,
            "failed": self.failed,
            "failure": self.failure,
            "progress": self.progress,
        }

    @classmethod
    def from_record(cls, value: Any) -> Streaks:
        if not isinstance(value, dict):
            return cls()

        def rounds(name: str) -> list[int]:
            items = value.get(name)
            if not isinstance(items, list):
                return []
            return [n for n in items if isinstance(n, int) and not isinstance(n, bool)]

        failure = value.get("failure")
        last = value.get("progress")
        found = cls(rounds("unchanged"), [], None, last if isinstance(last, str) else None)
        if isinstance(failure, dict) and isinstance(failure.get("digest"), str):
            found.failure = {k: failure.get(k) for k in ("digest", "exit_code", "error")}
            found.failed = rounds("failed")
        return found

    def reached(self, limit: int | None, compared: list[str]) -> tuple[str, dict[str, Any]] | None:
        """The pause the next round would meet: (``stalled`` or ``same_failure``, fields)."""
        if limit is None:
            return None
        if len(self.failed) >= limit and self.failure is not None:
            return "same_failure", {
                "rounds": self.failed[-limit:],
                "limit": limit,
                **self.failure,
            }
        if len(self.unchanged) >= limit:
            return "stalled", {
                "rounds": self.unchanged[-limit:],
                "limit": limit,
                "compared": compared,
            }
        return None


def paused_by(event: str, fields: dict[str, Any]) -> dict[str, Any]:
    """``paused_by`` in ``runs``/``show --json`` for a ``stalled``/``same_failure`` event."""
    keep = (
        ("rounds", "limit", "compared")
        if event == "stalled"
        else ("rounds", "limit", "exit_code", "error", "digest")
    )
    return {"kind": event, **{k: fields.get(k) for k in keep}}
