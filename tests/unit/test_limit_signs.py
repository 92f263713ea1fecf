"""Recognising a usage limit from what the CLIs print (SPEC §19): fast, from recorded lines.

The lines are what Claude Code 2.1.332 and Codex 0.171.0 printed and wrote against
the mock model refusing as the services do (tests/agents_mock/server.py), trimmed
of fields that play no part; tests/limits/test_limits_real.py runs the real CLIs.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import orjson
import pytest

from flowdrop_tui.core.errors import LinkRefusedError
from flowdrop_tui.core.paths import Layout
from flowdrop_tui.core.records.spend import limit_windows
from flowdrop_tui.core.records.spend.budget import check_limit_wait
from flowdrop_tui.core.sessions.limit_signs import (
    Limited,
    claude_limit,
    clock_time,
    codex_limit,
)

CLAUDE_MESSAGE = (
    "API Error: Request rejected (429) · This request would exceed your account's rate "
    "limit. Please try again later."
)
CLAUDE_RESULT = orjson.dumps(
    {
        "type": "result",
        "subtype": "success",
        "is_error": True,
        "terminal_reason": "api_error",
        "api_error_status": 429,
        "api_error_type": "rate_limit_error",
        "result": CLAUDE_MESSAGE,
        "session_id": "05e066f3-5173-4c2b-96c3-b4b82bdb788e",
    }
)
CLAUDE_ASSISTANT = {
    "type": "assistant",
    "message": {
        "model": "<synthetic>",
        "role": "assistant",
        "content": [{"type": "text", "text": CLAUDE_MESSAGE}],
    },
    "error": "rate_limit",
    "isApiErrorMessage": True,
    "apiErrorStatus": 429,
    "apiErrorType": "rate_limit_error",
}
CODEX_MESSAGE = (
    "You’ve hit your usage limit. Upgrade to Pro (https://chatgpt.com/explore/pro), visit "
    "https://chatgpt.com/settings/usage to purchase more credits or try again at 8:48 PM."
)


@pytest.fixture(autouse=True)
def utc(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Local time is UTC unless a test says otherwise (clock times are local)."""
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def lines(*items: object) -> bytes:
    return b"\n".join(orjson.dumps(item) for item in items) + b"\n"


# -- Claude Code ---------------------------------------------------------------------------


def test_claude_result_line_with_429_is_limited_with_no_reset() -> None:
    assert claude_limit(1, CLAUDE_RESULT + b"\n", None) == Limited(None, "result")


def test_claude_transcript_names_the_limit_when_the_result_line_does_not(tmp_path: Path) -> None:
    transcript = tmp_path / "t.jsonl"
    transcript.write_bytes(lines({"type": "user", "message": {}}, CLAUDE_ASSISTANT))
    result = {"type": "result", "is_error": True, "result": "something went wrong"}
    assert claude_limit(1, lines(result), transcript) == Limited(None, "transcript")


def test_claude_rate_limit_event_gives_the_reset() -> None:
    event = {
        "type": "rate_limit_event",
        "rate_limit_info": {"status": "rejected", "resetsAt": 1796160000},
    }
    found = claude_limit(1, lines(event, orjson.loads(CLAUDE_RESULT)), None)
    assert found == Limited(datetime.fromtimestamp(1796160000, UTC), "result")
    allowed = {"type": "rate_limit_event", "rate_limit_info": {"status": "allowed"}}
    assert claude_limit(1, lines(allowed, {"type": "result", "is_error": True}), None) is None


def test_claude_message_only_from_an_error_result() -> None:
    error = {"type": "result", "is_error": True, "result": CLAUDE_MESSAGE}
    assert claude_limit(1, lines(error), None) == Limited(None, "message")
    old = {"type": "result", "is_error": True, "result": "Claude AI usage limit reached|1796160000"}
    assert claude_limit(1, lines(old), None) == Limited(
        datetime.fromtimestamp(1796160000, UTC), "message"
    )


def test_claude_answer_that_talks_about_rate_limits_is_not_a_limit(tmp_path: Path) -> None:
    answer = {"type": "result", "is_error": False, "result": CLAUDE_MESSAGE, "subtype": "success"}
    transcript = tmp_path / "t.jsonl"
    transcript.write_bytes(lines(CLAUDE_ASSISTANT))  # even beside an older limited line
    assert claude_limit(0, lines(answer), transcript) is None
    plain_failure = {"type": "result", "is_error": True, "result": "API Error: 400 bad request"}
    assert claude_limit(1, lines(plain_failure), None) is None
    assert claude_limit(1, b"not json at all", None) is None


# -- Codex ---------------------------------------------------------------------------------

NOW = datetime(2026, 12, 1, 20, 46, 10, tzinfo=UTC)


def rollout(tmp_path: Path, *, resets_at: int | None, used: float = 100.0) -> Path:
    path = tmp_path / "rollout.jsonl"
    primary = (
        {"used_percent": used, "window_minutes": 300, "resets_at": resets_at}
        if resets_at is not None
        else None
    )
    path.write_bytes(
        lines(
            {
                "type": "event_msg",
                "payload": {
                    "type": "token_count",
                    "info": None,
                    "rate_limits": {"primary": primary, "rate_limit_reached_type": None},
                },
            },
            {
                "type": "event_msg",
                "payload": {
                    "type": "task_complete",
                    "last_agent_message": None,
                    "error": {"message": CODEX_MESSAGE, "codex_error_info": "usage_limit_exceeded"},
                },
            },
        )
    )
    return path


def test_codex_rollout_says_usage_limit_and_its_reset(tmp_path: Path) -> None:
    path = rollout(tmp_path, resets_at=1796158344)
    found = codex_limit(1, CODEX_MESSAGE, path, NOW)
    assert found == Limited(datetime.fromtimestamp(1796158344, UTC), "rollout")


def test_codex_rollout_without_a_reset_takes_the_clock_time_of_the_message(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    found = codex_limit(1, CODEX_MESSAGE, rollout(tmp_path, resets_at=None), NOW)
    assert found == Limited(datetime(2026, 12, 1, 20, 49, tzinfo=UTC), "rollout")


def test_codex_reset_to_the_second_from_a_rollout_window_in_the_minute_the_message_names(
    tmp_path: Path,
) -> None:
    """A usage limit whose rollout window is not reported used up (a credits limit, a
    percentage rounded down): its ``resets_at`` inside the minute of "try again at 8:48
    PM" is the reset, to the second — not the minute's end (a wait up to 60 s too long)."""
    exact = datetime(2026, 12, 1, 20, 48, 23, tzinfo=UTC)
    path = rollout(tmp_path, resets_at=int(exact.timestamp()), used=97.0)
    assert codex_limit(1, CODEX_MESSAGE, path, NOW) == Limited(exact, "rollout")
    later = rollout(tmp_path, resets_at=int(exact.timestamp()) + 3600, used=97.0)
    found = codex_limit(1, CODEX_MESSAGE, later, NOW)  # another window: the message stands
    assert found == Limited(datetime(2026, 12, 1, 20, 49, tzinfo=UTC), "rollout")


def test_codex_message_alone_when_there_is_no_rollout(monkeypatch: pytest.MonkeyPatch) -> None:
    found = codex_limit(1, CODEX_MESSAGE, None, NOW)
    assert found == Limited(datetime(2026, 12, 1, 20, 49, tzinfo=UTC), "message")
    assert codex_limit(1, "stream disconnected before completion", None, NOW) is None
    assert codex_limit(0, None, None, NOW) is None


def test_codex_answer_is_never_read(tmp_path: Path) -> None:
    """A session that succeeded is not limited: the answer is not even passed in."""
    assert codex_limit(0, None, tmp_path / "missing.jsonl", NOW) is None


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("try again at 8:48 PM.", datetime(2026, 12, 1, 20, 49, tzinfo=UTC)),
        ("try again at 12:05 AM.", datetime(2026, 12, 2, 0, 6, tzinfo=UTC)),  # after midnight
        ("try again at 8:00 PM.", datetime(2026, 12, 2, 20, 1, tzinfo=UTC)),  # past: tomorrow
        ("try again at 8:46 PM.", datetime(2026, 12, 1, 20, 47, tzinfo=UTC)),  # this minute
        ("try again at Dec 3rd, 2026 9:15 AM.", datetime(2026, 12, 3, 9, 16, tzinfo=UTC)),
        ("try again at Jan 2 9:15 AM.", datetime(2027, 1, 2, 9, 16, tzinfo=UTC)),
        ("try again later.", None),
        ("try again at 13:61 PM.", None),
        ("try again at Feb 30 9:15 AM.", None),
    ],
)
def test_codex_clock_time_is_the_next_such_time_in_the_local_zone(
    text: str, expected: datetime | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert clock_time(text, NOW) == expected


def test_codex_clock_time_is_local(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TZ", "America/New_York")  # 15:46 local at NOW
    time.tzset()
    assert clock_time("try again at 4:10 PM", NOW) == datetime(2026, 12, 1, 21, 11, tzinfo=UTC)


# -- limit_wait values -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "seconds"),
    [("12h", 43200.0), ("90m", 5400.0), ("1d12h", 129600.0), (0, 0.0), ("0", 0.0), (30, 30.0)],
)
def test_limit_wait_values(value: object, seconds: float) -> None:
    assert check_limit_wait(value, "x") == seconds


@pytest.mark.parametrize("value", ["soon", "12", "-1h", -5, True, float("nan"), None, "12h!"])
def test_bad_limit_wait_values_are_refused(value: object) -> None:
    with pytest.raises(ValueError, match="x"):
        check_limit_wait(value, "x")


# -- .flowdrop/limits.json -------------------------------------------------------------------


def test_a_window_without_reset_is_probed_by_one_session_at_a_time(tmp_path: Path) -> None:
    layout = Layout(tmp_path)
    now = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
    window = limit_windows.close(
        layout, "claude", until=None, source="result", run="r1", probe_base=60, now=now
    )
    assert window.next_probe == now + timedelta(minutes=1)
    assert limit_windows.take_probe(layout, "claude", probe_base=60, now=now) is not None
    later = now + timedelta(seconds=61)
    assert limit_windows.take_probe(layout, "claude", probe_base=60, now=later) is None  # mine
    held = limit_windows.take_probe(layout, "claude", probe_base=60, now=later)
    assert held is not None and held.next_probe == later + timedelta(minutes=2)  # others wait
    again = limit_windows.close(
        layout, "claude", until=None, source="result", run="r1", probe_base=60, now=later
    )
    assert again.probes == 2 and again.since == now  # the same window, probed again
    assert limit_windows.clear(layout, "claude", before=later) is True
    assert limit_windows.read(layout) == {}


def test_probe_intervals_double_up_to_thirty(tmp_path: Path) -> None:
    steps = [limit_windows.probe_step(n, 60).total_seconds() / 60 for n in range(1, 9)]
    assert steps == [1, 2, 4, 8, 16, 30, 30, 30]


def test_a_window_recorded_after_a_session_began_is_not_cleared_by_it(tmp_path: Path) -> None:
    layout = Layout(tmp_path)
    now = datetime.now(UTC)
    limit_windows.close(
        layout, "codex", until=now + timedelta(hours=1), source="rollout", run="r", probe_base=60
    )
    assert limit_windows.clear(layout, "codex", before=now - timedelta(seconds=5)) is False
    assert limit_windows.current(layout, "codex") is not None
    assert limit_windows.current(layout, "claude") is None


def test_limits_json_is_never_written_through_a_link(tmp_path: Path) -> None:
    layout = Layout(tmp_path)
    layout.ensure()
    outside = tmp_path / "outside.json"
    outside.write_text("keep me")
    os.symlink(outside, layout.limits)
    with pytest.raises(LinkRefusedError, match=r"limits\.json is a link"):
        limit_windows.close(layout, "codex", until=None, source="x", run=None, probe_base=60)
    with pytest.raises(LinkRefusedError):
        limit_windows.read(layout)
    assert outside.read_text() == "keep me"
    os.unlink(layout.limits)
    os.unlink(layout.limits_lock)
    os.symlink(outside, layout.limits_lock)
    with pytest.raises(LinkRefusedError, match=r"limits\.lock is a link"):
        limit_windows.close(layout, "codex", until=None, source="x", run=None, probe_base=60)
    assert outside.read_text() == "keep me"


def test_a_damaged_limits_json_holds_no_window(tmp_path: Path) -> None:
    layout = Layout(tmp_path)
    layout.ensure()
    for body in (b"{not json", b"[]", b'{"windows": {"codex": {"since": "never"}}}'):
        layout.limits.write_bytes(body)
        assert limit_windows.read(layout) == {}
    window = limit_windows.close(layout, "codex", until=None, source="x", run=None, probe_base=60)
    read = limit_windows.read(layout)["codex"].next_probe
    assert read is not None and window.next_probe is not None
    assert abs(read - window.next_probe) < timedelta(milliseconds=1)


# -- how a wait reads -------------------------------------------------------------------------


def test_waiting_and_limit_reached_words() -> None:
    from flowdrop_tui.format import limit_reached_words, waiting_words
    from flowdrop_tui.tui.labels import event_detail

    soon = (datetime.now(UTC) + timedelta(minutes=5)).replace(second=0, microsecond=0)
    clock = soon.astimezone().strftime("%H:%M")
    stamp = soon.isoformat().replace("+00:00", "Z")
    assert waiting_words({"backend": "claude", "until": stamp}) == (
        f"waiting for claude's limit until {clock}"
    )
    assert waiting_words({"backend": "claude", "until": None, "next_probe": stamp}) == (
        f"waiting for claude's limit (no reset time; next try {clock})"
    )
    assert waiting_words(None) == ""
    reached = {"backend": "codex", "until": stamp, "limit_wait": 3600}
    assert limit_reached_words(reached).startswith(f"codex's usage limit until {clock}")
    wait = {"event": "limit_wait", "backend": "codex", "until": stamp, "source": "rollout"}
    assert event_detail(wait) == f"waiting for codex's limit until {clock} · rollout"


# -- a wait inside Claude Code's own session ----------------------------------------------

# What Claude Code 2.1.332 wrote to its transcript when refused with a retry-after of
# 15 s (trimmed), and to stream-json --verbose at the same moment.
CLAUDE_RETRY_LINE = orjson.dumps(
    {
        "type": "system",
        "subtype": "api_error",
        "level": "error",
        "error": {
            "status": 429,
            "formatted": "429 This request would exceed your account's rate limit.",
            "rateLimits": {"rateLimitType": "five_hour", "resetsAt": 1796540883},
        },
        "retryInMs": 8870,
        "retryAttempt": 1,
        "maxRetries": 10,
        "source": "request_retry",
        "timestamp": "2026-12-06T07:07:56.172Z",
    }
)
CLAUDE_STREAM_RETRY = orjson.dumps(
    {
        "type": "system",
        "subtype": "api_retry",
        "attempt": 1,
        "max_retries": 10,
        "retry_delay_ms": 16763,
        "error_status": 429,
        "error": "rate_limit",
    }
)


def test_claude_says_it_waits_inside_its_session() -> None:
    from flowdrop_tui.core.sessions.limit_signs import claude_going_on, claude_inside_wait

    wait = claude_inside_wait(CLAUDE_RETRY_LINE, NOW)
    assert wait is not None and wait.source == "transcript"
    assert wait.until == datetime.fromtimestamp(1796540883, UTC)
    no_reset = orjson.loads(CLAUDE_RETRY_LINE)
    no_reset["error"].pop("rateLimits")
    wait = claude_inside_wait(orjson.dumps(no_reset), NOW)
    assert wait is not None and wait.until == NOW + timedelta(milliseconds=8870)
    streamed = claude_inside_wait(CLAUDE_STREAM_RETRY, NOW)
    assert streamed is not None and streamed.source == "stream"
    assert streamed.until == NOW + timedelta(milliseconds=16763)
    # a refusal it will not retry (a long window: only the limited answer), another error
    gave_up = orjson.loads(CLAUDE_RETRY_LINE)
    gave_up.pop("retryInMs")
    assert claude_inside_wait(orjson.dumps(gave_up), NOW) is None
    overloaded = orjson.loads(CLAUDE_RETRY_LINE)
    overloaded["error"]["status"] = 529
    assert claude_inside_wait(orjson.dumps(overloaded), NOW) is None
    assert claude_inside_wait(b"not json 429", NOW) is None
    # the model answered: the wait is over; the limited answer is not an answer
    answer = {"type": "assistant", "message": {"content": [{"type": "text", "text": "ok"}]}}
    assert claude_going_on(orjson.dumps(answer))
    assert not claude_going_on(orjson.dumps({**answer, "isApiErrorMessage": True}))
    assert not claude_going_on(orjson.dumps({**answer, "error": "rate_limit"}))


def test_growing_lines_reads_whole_lines_as_they_come_and_never_hangs(tmp_path: Path) -> None:
    from flowdrop_tui.core.sessions.limit_signs import GrowingLines

    path = tmp_path / "transcript.jsonl"
    follow = GrowingLines(path)
    assert follow.new_lines() == []  # not there yet
    path.write_bytes(b'{"a": 1}\n{"b"')
    assert follow.new_lines() == [b'{"a": 1}']
    with open(path, "ab") as grow:
        grow.write(b": 2}\n" + b"x" * (GrowingLines._LONGEST + 10))
    assert follow.new_lines() == [b'{"b": 2}']  # the long line is dropped, not held
    with open(path, "ab") as grow:
        grow.write(b"tail of the long line\n{}\n")
    assert follow.new_lines() == [b"{}"]
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    assert GrowingLines(fifo).new_lines() == []  # opened without waiting, not read
