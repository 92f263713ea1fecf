"""Telling a session that hit its account's usage limit from one that failed (SPEC §19).

What the real CLIs report at a limit (measured against the loopback mock answering
as the services do; docs/sessions.md has the table):

- **Claude Code** 2.1.332, ``-p --output-format json`` with an API key: exit 1 within
  about a second; the result line has ``"is_error": true``, ``"api_error_status":
  429``, ``"api_error_type": "rate_limit_error"``; its transcript's assistant line
  has ``"error": "rate_limit"``; the text is "API Error: Request rejected (429) ·
  This request would exceed your account's rate limit…". No reset time. (A
  ``retry-after`` of about a minute or less it waits out inside the session itself.)
  Subscription accounts get a ``rate_limit_event`` whose ``rate_limit_info`` has
  ``status: "rejected"`` and ``resetsAt`` (epoch seconds): read when present.
- **Codex** 0.171.0, ``exec --json``: exit 1 within about two seconds with an
  ``error`` event "You've hit your usage limit. … try again at 8:48 PM." and
  ``turn.failed``; its rollout's ``task_complete`` has ``error.codex_error_info:
  "usage_limit_exceeded"``, and its ``token_count`` events carry ``rate_limits``
  (``primary``/``secondary`` with ``resets_at``, when the service sent them).

Structured fields first (``source`` ``result``, ``transcript``, ``rollout``,
``event``); the CLI's own error message naming the limit only when none is there
(``source`` ``message``). Never the agent's answer: a session that succeeded is
never limited, and only the CLI's error text is ever read as a message.
"""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import orjson

_READ_LIMIT = 8 * 1024 * 1024  # of a transcript: its end is where a limit is


@dataclass(frozen=True)
class Limited:
    """A session ended by a usage limit: until when (``None``: not said) and how we know."""

    until: datetime | None
    source: str

    def to_json(self) -> dict[str, Any]:
        return {"until": iso(self.until), "source": self.source}

    @classmethod
    def from_json(cls, value: Any) -> Limited | None:
        """A backend's own report (``Reply.limited`` as a dict), or ``None``."""
        if isinstance(value, Limited):
            return value
        if not isinstance(value, dict):
            return None
        until = value.get("until")
        when = parse_iso(until) if isinstance(until, str) else None
        return cls(when, str(value.get("source") or "backend"))


def iso(when: datetime | None) -> str | None:
    if when is None:
        return None
    return when.astimezone(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def parse_iso(text: str) -> datetime | None:
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)


def from_epoch(value: Any) -> datetime | None:
    """Epoch seconds (or milliseconds, as some fields carry) as a UTC time."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if value > 1e11:  # milliseconds
        value = value / 1000
    try:
        return datetime.fromtimestamp(value, UTC)
    except (OverflowError, OSError, ValueError):
        return None


def _json_lines(data: bytes) -> list[dict[str, Any]]:
    found = []
    for line in data.splitlines():
        try:
            item = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue
        if isinstance(item, dict):
            found.append(item)
    return found


def _tail(path: Path | None) -> bytes:
    if path is None:
        return b""
    try:
        with open(path, "rb") as source:
            source.seek(0, 2)
            size = source.tell()
            source.seek(max(0, size - _READ_LIMIT))
            return source.read()
    except OSError:
        return b""


# -- Claude Code ------------------------------------------------------------------------

_CLAUDE_MESSAGE = re.compile(
    r"(request rejected \(429\)|exceed your account.s rate limit|usage limit reached"
    r"|hit your (usage |session |weekly )?limit|rate_limit_error)",
    re.IGNORECASE,
)
_CLAUDE_EPOCH = re.compile(
    r"limit reached\|(\d{9,13})"
)  # older: "Claude AI usage limit reached|<epoch>"


def _rate_limit_event(lines: list[dict[str, Any]]) -> Limited | None:
    for line in reversed(lines):
        if line.get("type") != "rate_limit_event":
            continue
        info = line.get("rate_limit_info")
        if isinstance(info, dict) and info.get("status") == "rejected":
            return Limited(from_epoch(info.get("resetsAt")), "event")
    return None


def claude_limit(exit_code: int, stdout: bytes, transcript: Path | None) -> Limited | None:
    """Whether a ``claude -p`` session ended at a usage limit, from its output and transcript.

    A session that answered (exit 0, ``is_error`` false) is never limited, whatever
    its answer says."""
    lines = _json_lines(stdout)
    result = next((item for item in reversed(lines) if item.get("type") == "result"), None)
    if exit_code == 0 and (result is None or not result.get("is_error")):
        return None
    event = _rate_limit_event(lines)
    until = event.until if event is not None else None
    if result is not None and (
        result.get("api_error_status") == 429 or result.get("api_error_type") == "rate_limit_error"
    ):
        return Limited(until or _claude_until(result.get("result")), "result")
    if event is not None:
        return event
    for line in reversed(_json_lines(_tail(transcript))):
        if line.get("type") == "assistant" and (
            line.get("error") == "rate_limit" or line.get("apiErrorStatus") == 429
        ):
            return Limited(until, "transcript")
        if line.get("type") in ("user", "assistant") and not line.get("isApiErrorMessage"):
            break  # the last message is not an API error: what came before does not count
    text = result.get("result") if result is not None and result.get("is_error") else None
    if isinstance(text, str) and _CLAUDE_MESSAGE.search(text):
        return Limited(_claude_until(text), "message")
    return None


def _claude_until(text: Any) -> datetime | None:
    if not isinstance(text, str):
        return None
    match = _CLAUDE_EPOCH.search(text)
    return from_epoch(int(match.group(1))) if match else None


# -- Codex ------------------------------------------------------------------------------

_MINUTE = timedelta(minutes=1)
_CODEX_MESSAGE = re.compile(r"(hit your usage limit|usage limit (has been )?reached)", re.I)
_MONTHS = {
    m: i
    for i, m in enumerate(
        ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"), 1
    )
}
_TRY_AGAIN = re.compile(
    r"try again at\s+(?:(?P<month>[A-Za-z]{3})[a-z]*\.?\s+(?P<day>\d{1,2})(?:st|nd|rd|th)?,?\s+"
    r"(?:(?P<year>\d{4})\s+)?)?(?P<hour>\d{1,2}):(?P<minute>\d{2})\s*(?P<ampm>[AaPp][Mm])",
)


def clock_time(text: str, now: datetime | None = None) -> datetime | None:
    """The time in Codex's "try again at 6:55 PM" (local time, cut to the minute) as the
    end of that minute — when the reset is surely over (its start would mean a call
    refused again, then the same wait) — the next such time in the local zone when no
    date is given (Codex gives one when it is not today). ``None`` when the text names
    no time. The rollout's exact reset is preferred to this (``codex_limit``)."""
    match = _TRY_AGAIN.search(text)
    if match is None:
        return None
    local_now = (now or datetime.now(UTC)).astimezone()
    hour, minute = int(match["hour"]), int(match["minute"])
    if not (1 <= hour <= 12 and 0 <= minute <= 59):
        return None
    hour = hour % 12 + (12 if match["ampm"].lower() == "pm" else 0)
    try:
        if match["month"]:
            month = _MONTHS.get(match["month"][:3].lower())
            if month is None:
                return None
            year = int(match["year"]) if match["year"] else local_now.year
            when = local_now.replace(
                year=year,
                month=month,
                day=int(match["day"]),
                hour=hour,
                minute=minute,
                second=0,
                microsecond=0,
            )
            if not match["year"] and when < local_now - timedelta(days=1):
                when = when.replace(year=year + 1)  # "Jan 2 …" said in late December
        else:
            when = local_now.replace(hour=hour, minute=minute, second=0, microsecond=0)
            if when + timedelta(minutes=1) <= local_now:
                when += timedelta(days=1)
    except ValueError:  # a day the month does not have
        return None
    # Codex cuts the reset to the minute: it is over by the end of the minute named.
    return (when + timedelta(minutes=1)).astimezone(UTC)


def _rollout_limit(rollout: Path | None) -> tuple[bool, datetime | None, list[datetime]]:
    """Whether the rollout says the turn ended at a usage limit, the reset it gives (of
    a window used up), and every reset its last rate limits name (used up or not)."""
    hit = False
    until: datetime | None = None
    seen: list[datetime] = []
    for line in _json_lines(_tail(rollout)):
        payload = line.get("payload")
        if line.get("type") != "event_msg" or not isinstance(payload, dict):
            continue
        kind = payload.get("type")
        if kind == "task_complete" or kind == "error":
            error = payload.get("error") if kind == "task_complete" else payload
            info = error.get("codex_error_info") if isinstance(error, dict) else None
            if info in ("usage_limit_exceeded", "usageLimitExceeded") or (
                isinstance(info, dict) and ("usage_limit_exceeded" in info)
            ):
                hit = True
        elif kind == "token_count" and isinstance(payload.get("rate_limits"), dict):
            limits = payload["rate_limits"]
            if limits.get("rate_limit_reached_type"):
                hit = True
            windows = [
                w for w in (limits.get("primary"), limits.get("secondary")) if isinstance(w, dict)
            ]
            seen = [r for r in (from_epoch(w.get("resets_at")) for w in windows) if r is not None]
            found = [
                r
                for w in windows
                if (w.get("used_percent") or 0) >= 100
                and (r := from_epoch(w.get("resets_at"))) is not None
            ]
            if found:
                until = max(found)
    return hit, until, seen


def rollout_reset(rollout: Path | None) -> datetime | None:
    """A reset a Codex rollout names (of a window used up first), if any."""
    _, until, seen = _rollout_limit(rollout)
    return until or (max(seen) if seen else None)


def codex_limit(
    exit_code: int, error: str | None, rollout: Path | None, now: datetime | None = None
) -> Limited | None:
    """Whether a ``codex exec`` session ended at a usage limit: its rollout's
    ``usage_limit_exceeded`` first, else its ``error``/``turn.failed`` message
    naming the limit. ``error`` is only ever the CLI's error (never an answer)."""
    if exit_code == 0 and not error:
        return None
    hit, until, seen = _rollout_limit(rollout)
    said = error if isinstance(error, str) and _CODEX_MESSAGE.search(error) else None
    if until is None and said is not None:
        until = clock_time(said, now)
        # The message's minute names the reset; a window of the rollout resetting inside
        # that minute (one not reported used up) gives it to the second.
        exact = [r for r in seen if until is not None and until - _MINUTE <= r < until]
        until = max(exact) if exact else until
    if hit:
        return Limited(until, "rollout")
    if said is not None:
        return Limited(until, "message")
    return None


# -- a wait inside the CLI's own session ------------------------------------------------


@dataclass(frozen=True)
class InsideWait:
    """The CLI said it was refused at a limit and will try again itself: until when
    (the reset it gave, else its next try; ``None``: not said) and where it said so."""

    until: datetime | None
    source: str


class GrowingLines:
    """The whole lines appended to a file another process is writing, as they come.

    Read as every record file is (regular only, ``O_NONBLOCK``: nothing planted there
    hangs or grows a session), at most ``_STEP`` bytes a look; a line longer than
    ``_LONGEST`` (a request blob in a transcript) is skipped, never held."""

    _STEP = 4 << 20
    _LONGEST = 1 << 20

    def __init__(self, path: Path | None = None, *, fd: int | None = None) -> None:
        self.path = path
        self.fd = fd  # a file already open (a session's captured output), never closed here
        self._offset = 0
        self._partial = b""
        self._skipping = False

    def new_lines(self) -> list[bytes]:
        if self.fd is not None:
            fd = self.fd
        elif self.path is not None:
            try:
                fd = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
            except OSError:
                return []
        else:
            return []
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                return []
            data = os.pread(fd, self._STEP, self._offset)
        except OSError:
            return []
        finally:
            if fd != self.fd:
                os.close(fd)
        self._offset += len(data)
        lines = (self._partial + data).split(b"\n")
        self._partial = lines.pop()
        if self._skipping and lines:
            lines.pop(0)  # the rest of a line too long to keep
            self._skipping = False
        if len(self._partial) > self._LONGEST:
            self._partial = b""
            self._skipping = True
        return [line for line in lines if line.strip()]


def _line(raw: bytes) -> dict[str, Any] | None:
    if b"429" not in raw and b"rate_limit" not in raw and b'"assistant"' not in raw:
        return None  # most lines of a transcript: not parsed at all
    try:
        item = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    return item if isinstance(item, dict) else None


def claude_inside_wait(raw: bytes, now: datetime | None = None) -> InsideWait | None:
    """A line of Claude Code's transcript or ``stream-json`` output saying it was refused
    at a limit and will try again inside its session.

    Claude Code 2.1.332 writes, as it is refused (docs/sessions.md):

    - to its transcript, ``{"type": "system", "subtype": "api_error", "error": {"status":
      429, "rateLimits": {"resetsAt": <epoch>}, …}, "retryInMs": N, …}`` — only when it
      will retry (a window it gives up on has none, just the limited answer);
    - to ``--output-format stream-json --verbose``, ``{"type": "system", "subtype":
      "api_retry", "error_status": 429, "error": "rate_limit", "retry_delay_ms": N}``;
      and, for subscription accounts, ``rate_limit_event`` with ``status: "rejected"``
      and ``resetsAt``.

    ``until`` is the reset when given, else its next try."""
    item = _line(raw)
    if item is None:
        return None
    now = now or datetime.now(UTC)
    kind, subtype = item.get("type"), item.get("subtype")
    if kind == "system" and subtype == "api_error":
        error = item.get("error")
        retry = item.get("retryInMs")
        if not isinstance(error, dict) or error.get("status") != 429 or retry is None:
            return None
        limits = error.get("rateLimits")
        reset = from_epoch(limits.get("resetsAt")) if isinstance(limits, dict) else None
        return InsideWait(reset or _after(now, retry), "transcript")
    if kind == "system" and subtype == "api_retry":
        if item.get("error_status") != 429 and item.get("error") != "rate_limit":
            return None
        return InsideWait(_after(now, item.get("retry_delay_ms")), "stream")
    if kind == "rate_limit_event":
        info = item.get("rate_limit_info")
        if isinstance(info, dict) and info.get("status") == "rejected":
            return InsideWait(from_epoch(info.get("resetsAt")), "event")
    return None


def claude_going_on(raw: bytes) -> bool:
    """A line saying the model answered (an assistant message that is not an API error):
    a wait inside the session is over."""
    item = _line(raw)
    if item is None or item.get("type") != "assistant":
        return False
    return not item.get("isApiErrorMessage") and not item.get("error")


def _after(now: datetime, milliseconds: Any) -> datetime | None:
    if isinstance(milliseconds, bool) or not isinstance(milliseconds, int | float):
        return None
    if not 0 <= milliseconds < 366 * 86400 * 1000:
        return None
    return now + timedelta(milliseconds=milliseconds)
