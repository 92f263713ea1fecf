"""EventTail: a growing cycle.jsonl read incrementally, tolerant of torn and junk lines."""

from __future__ import annotations

import os
from pathlib import Path

import orjson

from flowdrop_tui.core.records.log.event_lines import read_events
from flowdrop_tui.core.records.log.tail import EventTail


def line(n: int) -> bytes:
    return orjson.dumps({"t": "2026-08-17T01:44:55.212Z", "event": "log", "n": n}) + b"\n"


def test_only_new_whole_lines_are_returned(tmp_path: Path) -> None:
    """Guards against re-reading: each read returns what was appended since the last."""
    path = tmp_path / "cycle.jsonl"
    tail = EventTail(path)
    assert tail.read().events == []  # not there yet
    path.write_bytes(line(0) + line(1))
    assert [ev["n"] for ev in tail.read().events] == [0, 1]
    assert tail.read().events == []
    with path.open("ab") as handle:
        handle.write(line(2))
    assert [ev["n"] for ev in tail.read().events] == [2]
    assert tail.offset == path.stat().st_size


def test_a_line_being_written_waits_and_a_torn_one_is_skipped(tmp_path: Path) -> None:
    """Guards the torn last line: not returned half, and junk once a line follows it,
    exactly as the whole-file reader skips it."""
    path = tmp_path / "cycle.jsonl"
    path.write_bytes(line(0) + line(1)[:10])
    tail = EventTail(path)
    assert [ev["n"] for ev in tail.read().events] == [0]
    with path.open("ab") as handle:
        handle.write(line(1)[10:])
    assert [ev["n"] for ev in tail.read().events] == [1]  # completed: read whole
    with path.open("ab") as handle:
        handle.write(line(2)[:7])  # a kill mid-line …
        handle.write(line(3))  # … then a resumed run appends after it
    events = tail.read().events
    assert events == [ev for ev in read_events(path) if ev["n"] >= 2] == []


def test_a_replaced_or_truncated_file_starts_over(tmp_path: Path) -> None:
    """Guards against reading from a stale offset into a different file."""
    path = tmp_path / "cycle.jsonl"
    path.write_bytes(line(0) + line(1) + line(2))
    tail = EventTail(path)
    assert len(tail.read().events) == 3
    fresh = tmp_path / "new.jsonl"
    fresh.write_bytes(line(7))
    os.replace(fresh, path)
    read = tail.read()
    assert read.restarted and [ev["n"] for ev in read.events] == [7]


def test_a_large_record_is_read_in_chunks(tmp_path: Path) -> None:
    """Guards memory: a long record streams in bounded chunks and nothing is lost."""
    path = tmp_path / "cycle.jsonl"
    path.write_bytes(b"".join(line(n) for n in range(5000)))
    tail = EventTail(path)
    seen: list[int] = []
    reads = 0
    while True:
        read = tail.read(limit=4096)
        reads += 1
        seen.extend(ev["n"] for ev in read.events)
        if not read.more:
            break
    assert seen == list(range(5000))
    assert reads > 10
