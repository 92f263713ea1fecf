"""Event times: how every record writes one (``now_iso``) and reads one (``parse_time``)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any


def now_iso() -> str:
    """ISO-8601 UTC with milliseconds, as every event's ``t``."""
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def parse_time(stamp: Any) -> datetime | None:
    """An ISO-8601 time (an event's ``t``) as an aware datetime, a naive one taken as UTC;
    None when it is not an ISO time."""
    if not isinstance(stamp, str):
        return None
    try:
        when = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except ValueError:
        return None
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)
