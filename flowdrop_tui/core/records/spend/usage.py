"""Token usage: what a session spent, read from its transcript (SPEC §14).

The one place usage is read and added up. Its shape, everywhere it is recorded
or shown (``session_closed``, ``show``, ``runs``, ``flows``; docs/records.md):

    {"input": int, "output": int, "cache_read": int, "cache_write": int}

``input`` is every token sent to the model, cache reads and cache writes
included; ``cache_read`` and ``cache_write`` are those parts of it, shown apart.
``output`` is every token the model produced (reasoning included). A budget in
tokens counts ``input + output`` (:attr:`Usage.tokens`).

How each agent CLI writes it (verified against Claude Code 2.1.332 and Codex
0.171.0, docs/sessions.md):

- Claude Code: each ``assistant`` line carries ``message.usage``; a message of
  several content blocks is several lines repeating the same usage under the
  same ``message.id``, so each id counts once (its last line wins).
  ``input_tokens`` there excludes the cache, so input is the sum of the three.
- Codex: ``event_msg`` lines of ``payload.type == "token_count"`` carry the
  session's running total in ``payload.info.total_token_usage``; the last one
  is the session's. Its ``input_tokens`` already includes ``cached_input_tokens``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

FIELDS = ("input", "output", "cache_read", "cache_write")
_READ_LIMIT = 256 * 1024 * 1024  # a transcript bigger than this is not read


@dataclass(frozen=True)
class Usage:
    input: int = 0
    output: int = 0
    cache_read: int = 0
    cache_write: int = 0

    @property
    def tokens(self) -> int:
        """What a token budget counts: everything in and out."""
        return self.input + self.output

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.input + other.input,
            self.output + other.output,
            self.cache_read + other.cache_read,
            self.cache_write + other.cache_write,
        )

    def to_json(self) -> dict[str, int]:
        return {name: getattr(self, name) for name in FIELDS}

    @classmethod
    def from_json(cls, value: Any) -> Usage | None:
        """A recorded usage (a ``session_closed`` event's), or ``None`` when there is none
        or it is not the shape above."""
        if not isinstance(value, Mapping):
            return None
        numbers = {name: value.get(name, 0) for name in FIELDS}
        if not all(_count(n) == n for n in numbers.values()):
            return None
        return cls(**numbers)


def total(usages: Iterable[Usage | None]) -> Usage | None:
    """The sum of those known; ``None`` when none is (no session reported usage)."""
    known = [u for u in usages if u is not None]
    if not known:
        return None
    result = Usage()
    for usage in known:
        result = result + usage
    return result


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def _lines(path: Path) -> Iterable[dict[str, Any]]:
    with open(path, "rb") as transcript:
        data = transcript.read(_READ_LIMIT)
    for line in data.splitlines():
        try:
            record = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue  # a line being written, or not JSON: not usage
        if isinstance(record, dict):
            yield record


def claude_usage(path: Path) -> Usage | None:
    """Claude Code: ``message.usage`` of ``assistant`` lines, once per ``message.id``."""
    per_message: dict[str, Usage] = {}
    for n, record in enumerate(_lines(path)):
        message = record.get("message")
        if record.get("type") != "assistant" or not isinstance(message, dict):
            continue
        usage = message.get("usage")
        if not isinstance(usage, dict):
            continue
        cache_read = _count(usage.get("cache_read_input_tokens"))
        cache_write = _count(usage.get("cache_creation_input_tokens"))
        key = message.get("id")
        per_message[key if isinstance(key, str) else f"line {n}"] = Usage(
            input=_count(usage.get("input_tokens")) + cache_read + cache_write,
            output=_count(usage.get("output_tokens")),
            cache_read=cache_read,
            cache_write=cache_write,
        )
    return total(per_message.values())


def codex_usage(path: Path) -> Usage | None:
    """Codex: the last ``token_count`` running total (``total_token_usage``)."""
    last: Usage | None = None
    for record in _lines(path):
        payload = record.get("payload")
        if not isinstance(payload, dict) or payload.get("type") != "token_count":
            continue
        info = payload.get("info")
        totals = info.get("total_token_usage") if isinstance(info, dict) else None
        if not isinstance(totals, dict):
            continue
        last = Usage(
            input=_count(totals.get("input_tokens")),
            output=_count(totals.get("output_tokens")),
            cache_read=_count(totals.get("cached_input_tokens")),
            cache_write=_count(totals.get("cache_write_input_tokens")),
        )
    return last


READERS: dict[str, Callable[[Path], Usage | None]] = {
    "claude": claude_usage,
    "codex": codex_usage,
}


def read_usage(backend: str, transcript: Path | None) -> Usage | None:
    """What the session with ``backend`` spent, from its transcript (through the link or
    the file itself); ``None`` for a backend with no usage (``command``, one plugged in),
    a transcript that is gone or unreadable, or one that records none yet."""
    reader = READERS.get(backend)
    if reader is None or transcript is None:
        return None
    try:
        return reader(transcript)
    except (OSError, ValueError):
        return None
