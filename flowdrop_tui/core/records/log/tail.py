"""Read a run's ``cycle.jsonl`` as it grows: only new whole lines, never a byte twice.

Following a live run must not re-read its record on every change: a loop meant
to run for a week appends a million lines. ``EventTail`` keeps a byte offset
and returns only the lines completed since the last read. A line without its
newline yet (being written, or torn by a kill) is left for the next read; a
torn line that is later followed by a whole one is skipped as junk, exactly as
``records.read_events`` skips it when it reads the whole file.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from flowdrop_tui.core.files.regular import open_regular
from flowdrop_tui.core.records.log.event_lines import line_batches, parse_lines

CHUNK = 1 << 20  # read about this much per call: a huge record streams, it never balloons


@dataclass
class TailRead:
    """What one read found."""

    events: list[dict[str, Any]] = field(default_factory=list)
    restarted: bool = False  # the file was replaced or truncated: this read starts over
    more: bool = False  # there is more to read right now (the chunk limit was reached)


class EventTail:
    """The read side of one ``cycle.jsonl``, remembering how far it has read."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = 0
        self._inode: tuple[int, int] | None = None

    def start_at(self, offset: int, inode: tuple[int, int]) -> None:
        """Read on from ``offset`` of the file ``inode`` names (``(st_dev, st_ino)``): what
        is before it was read another way (a cached fold)."""
        self.offset, self._inode = offset, inode

    def read(self, limit: int = CHUNK) -> TailRead:
        """The whole lines appended since the last read (at most ``limit`` bytes of them)."""
        result = TailRead()
        try:
            fd = open_regular(self.path)  # never a FIFO or a device
        except OSError:
            return result  # not there (yet, or any more): nothing new
        try:
            stat = os.fstat(fd)
            inode = (stat.st_dev, stat.st_ino)
            if self._inode is not None and (inode != self._inode or stat.st_size < self.offset):
                result.restarted = True  # replaced or cut short: what we read is gone
                self.offset = 0
            self._inode = inode
            if stat.st_size <= self.offset:
                return result
            # Whole lines only, a chunk at a time; a line longer than a chunk is read
            # whole (it had been dropped: a big `ended` event turned a completed run
            # into an interrupted one in the UI).
            read = 0
            for lines, after in line_batches(fd, self.offset, stat.st_size, min(limit, CHUNK)):
                result.events.extend(parse_lines(lines))
                read += after - self.offset
                self.offset = after
                if read >= limit:
                    result.more = self.offset < stat.st_size
                    break
        finally:
            os.close(fd)
        return result
