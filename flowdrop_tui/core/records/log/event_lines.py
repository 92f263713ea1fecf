"""``cycle.jsonl``'s read side: read tolerantly, a chunk at a time.

A record is read in whole lines only: a torn last line (a kill mid-write, or a line
still being written) and any line that does not parse are skipped, never an error.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from flowdrop_tui.core.files.regular import open_regular


def parse_lines(raw: bytes) -> list[dict[str, Any]]:
    """Every whole, parseable event in ``raw``; torn lines and junk are skipped."""
    # A batch of lines parsed as one JSON array (half the time of a parse per line, what a
    # giant record's cold fold costs); any junk in it, and it is parsed line by line. As
    # many values as lines: a junk line holding two objects never passes as two events.
    body = raw.strip(b"\n")
    if body:
        try:
            items = orjson.loads(b"[" + body.replace(b"\n", b",") + b"]")
        except orjson.JSONDecodeError:
            items = None
        if items is not None and len(items) == body.count(b"\n") + 1:
            return [i for i in items if isinstance(i, dict) and isinstance(i.get("event"), str)]
    events: list[dict[str, Any]] = []
    for line in raw.split(b"\n"):
        if not line.strip():
            continue
        try:
            item = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue
        if isinstance(item, dict) and isinstance(item.get("event"), str):
            events.append(item)
    return events


READ_CHUNK = 1 << 20  # a record is read this much at a time: a huge one streams
MAX_LINE = 64 << 20  # a longer line is skipped as junk (the engine writes none this long)


def line_batches(
    fd: int, offset: int = 0, end: int | None = None, chunk: int = READ_CHUNK
) -> Iterator[tuple[bytes, int]]:
    """Whole lines of ``fd`` from ``offset``, in batches of about ``chunk`` bytes:
    ``(lines, offset just past them)``. A line longer than a chunk is read whole (up to
    ``MAX_LINE``: then it is passed over, yielded as ``b""``); a last line without its
    newline (being written, or torn) is not yielded."""
    end = os.fstat(fd).st_size if end is None else end
    carry = bytearray()
    skipping = False
    position = offset
    while position < end:
        data = os.pread(fd, min(chunk, end - position), position)
        if not data:
            return
        start = position
        position += len(data)
        if skipping:
            first = data.find(b"\n")
            if first < 0:
                continue
            skipping = False
            data, start = data[first + 1 :], start + first + 1
            if data.rfind(b"\n") < 0:
                yield b"", start  # past the over-long line
        last = data.rfind(b"\n")
        if last < 0:
            carry += data
            if len(carry) > MAX_LINE:
                carry.clear()
                skipping = True
            continue
        lines = bytes(carry) + data[: last + 1]
        carry[:] = data[last + 1 :]
        yield lines, start + last + 1


def read_events(path: Path) -> list[dict[str, Any]]:
    """Every event in the record at ``path``, read a chunk at a time."""
    return [event for batch in event_batches(path) for event in batch]


def event_batches(path: Path) -> Iterator[list[dict[str, Any]]]:
    """The record's events a chunk at a time (a huge record never sits in memory whole),
    its last line too when it parses without its newline."""
    for lines in _whole_lines(path):
        yield parse_lines(lines)


def events_named(path: Path, name: str) -> Iterator[dict[str, Any]]:
    """The record's ``name`` events, streamed: only the lines that hold the event's name are
    parsed (a 1 GB record is looked through at the speed of a byte search)."""
    needle = b'"event":' + orjson.dumps(name)
    for lines in _whole_lines(path):
        found = lines.find(needle)
        while found >= 0:
            begin = lines.rfind(b"\n", 0, found) + 1
            end = lines.find(b"\n", found)
            end = len(lines) if end < 0 else end
            for event in parse_lines(lines[begin:end]):
                if event["event"] == name:
                    yield event
            found = lines.find(needle, end)


def count_named(path: Path, name: str) -> int:
    """How many lines of the record hold a ``name`` event's name (at least as many as
    there are such events: a log's fields may repeat it), streamed, never parsed."""
    needle = b'"event":' + orjson.dumps(name)
    return sum(lines.count(needle) for lines in _whole_lines(path))


def _whole_lines(path: Path) -> Iterator[bytes]:
    try:
        fd = open_regular(path)  # a FIFO or /dev/zero planted there: never read
    except OSError:
        return
    try:
        size = os.fstat(fd).st_size
        done = 0
        for lines, after in line_batches(fd, 0, size):
            done = after
            yield lines
        if done < size:
            yield os.pread(fd, min(size - done, MAX_LINE), done)
    except OSError:
        return
    finally:
        os.close(fd)


def last_events(fd: int, end: int, count: int, chunk: int = READ_CHUNK) -> list[dict[str, Any]]:
    """The last ``count`` whole events of ``fd`` before ``end`` (a line's end), read
    backwards a chunk at a time: never the record from its start."""
    data = b""
    position = end
    while position > 0 and data.count(b"\n") <= count and len(data) <= MAX_LINE * 2:
        step = min(chunk, position)
        position -= step
        data = os.pread(fd, step, position) + data
    if position > 0:
        data = data[data.find(b"\n") + 1 :]  # the first line read is (maybe) cut: left out
    return parse_lines(data)[-count:] if count > 0 else []


def read_first_event(path: Path) -> dict[str, Any] | None:
    """The first event (``created``) without reading the whole file."""
    for batch in event_batches(path):
        if batch:
            return batch[0]
    return None
