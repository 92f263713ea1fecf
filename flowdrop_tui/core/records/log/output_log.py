"""A run's ``output.log``: what its flow printed (stdout and stderr, tracebacks
included), read from a line near its end onward and followed as it grows.

The run's own process is the file's only writer. Readers open it ``O_NOFOLLOW``
and ``O_NONBLOCK`` and read it only when it is a regular file: a link or a fifo
left in its place is reported, never followed or waited on. Bytes are decoded as
UTF-8 with replacement characters, so a flow that prints binary never breaks a
reader. A week-long run may print gigabytes: a tail is found by reading back
from the end, and following reads only what was appended since the last read.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from flowdrop_tui.core.errors import OutputUnreadableError

TAIL_LINES = 20  # the lines ``show`` gives (``output_tail``)
TAIL_BYTES = 256 * 1024  # a tail is looked for in at most this much of the file's end
CHUNK = 1 << 20  # one read takes at most this much: a huge log streams, it never balloons
MAX_LINE = 64 * 1024  # a line longer than this (no newline in sight) is cut into pieces
_BACK = 64 * 1024  # reading back from the end, this much at a time


def _open(path: Path) -> int | None:
    """A descriptor on ``path`` when it is a regular file; None when it is not there."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise OutputUnreadableError(
                f"{path} is a link, not the run's own output.log; it is never followed"
            ) from None
        raise OutputUnreadableError(f"cannot read {path}: {exc.strerror or exc}") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise OutputUnreadableError(f"{path} is not a regular file; it is not read")
    return fd


def _decode(raw: bytes) -> str:
    return raw.decode("utf-8", errors="replace").removesuffix("\r")


def _start_of_last_lines(fd: int, size: int, count: int, max_bytes: int | None) -> int:
    """The offset where the last ``count`` lines begin (an unfinished last line counts
    as one), looking back at most ``max_bytes`` (then: that far back, mid-line)."""
    floor = 0 if max_bytes is None else max(0, size - max_bytes)
    # A newline that ends the file closes the last line; it does not start another.
    wanted = count + 1 if size and os.pread(fd, 1, size - 1) == b"\n" else count
    end = size
    found = 0
    while end > floor:
        start = max(floor, end - _BACK)
        block = os.pread(fd, end - start, start)
        at = len(block)
        while True:
            at = block.rfind(b"\n", 0, at)
            if at < 0:
                break
            found += 1
            if found == wanted:
                return start + at + 1
        end = start
    return floor


@dataclass
class OutputRead:
    """What one read found: whole lines, oldest first."""

    lines: list[str] = field(default_factory=list)
    restarted: bool = False  # the file was replaced or cut short: this read starts over
    more: bool = False  # there is more to read right now (the chunk limit was reached)


class OutputTail:
    """The read side of one ``output.log``, remembering how far it has read.

    ``last``: begin with the file's last ``last`` lines (looked for in its last
    ``max_bytes``) instead of its first byte; decided at the first read that finds it.
    """

    def __init__(
        self, path: Path, *, last: int | None = None, max_bytes: int | None = TAIL_BYTES
    ) -> None:
        self.path = path
        self.offset = 0
        self.skipped = 0  # bytes before where reading began (a tail): earlier output exists
        self._last = last
        self._max_bytes = max_bytes
        self._inode: tuple[int, int] | None = None
        self._partial = b""

    def read(self, *, final: bool = False, limit: int = CHUNK) -> OutputRead:
        """The whole lines appended since the last read; ``final``: the writer is gone, so
        an unfinished last line is a line too. Raises ``OutputUnreadableError``."""
        result = OutputRead()
        fd = _open(self.path)
        if fd is None:
            return result  # not there: a run from before output was kept, or removed
        try:
            info = os.fstat(fd)
            size = info.st_size
            inode = (info.st_dev, info.st_ino)
            if self._inode is not None and (inode != self._inode or size < self.offset):
                result.restarted = True
                self.offset = self.skipped = 0
                self._partial = b""
            if self._inode is None and self._last is not None:
                self.offset = _start_of_last_lines(fd, size, self._last, self._max_bytes)
                self.skipped = self.offset
            self._inode = inode
            data = b""
            if size > self.offset:
                data = os.pread(fd, min(limit, size - self.offset), self.offset)
        finally:
            os.close(fd)
        self.offset += len(data)
        result.more = self.offset < size
        pieces = (self._partial + data).split(b"\n")
        self._partial = pieces.pop()
        if self._partial and (len(self._partial) >= MAX_LINE or (final and not result.more)):
            pieces.append(self._partial)
            self._partial = b""
        result.lines = [_decode(piece) for piece in pieces]
        return result

    def read_all(self, *, final: bool = False) -> OutputRead:
        """Everything there is now, chunk by chunk (for what is known to be small)."""
        total = OutputRead()
        while True:
            read = self.read(final=final)
            if read.restarted:
                total = OutputRead(restarted=True)
            total.lines.extend(read.lines)
            if not read.more:
                return total


def tail_lines(path: Path, count: int = TAIL_LINES) -> tuple[list[str], bool]:
    """The last ``count`` lines of ``output.log`` and whether earlier output was left out.
    Raises ``OutputUnreadableError`` for a link or anything but a regular file."""
    tail = OutputTail(path, last=count)
    lines = tail.read_all(final=True).lines
    return lines[-count:], tail.skipped > 0 or len(lines) > count


def _every_line(path: Path, final: bool) -> Iterator[str]:
    tail = OutputTail(path, max_bytes=None)
    while True:
        read = tail.read(final=final)
        yield from read.lines
        if not read.more:
            return


def page(path: Path, *, after: int, limit: int, final: bool) -> tuple[list[str], bool]:
    """Lines ``after + 1`` to ``after + limit`` of ``output.log`` (numbered from 1, as a
    line longer than ``MAX_LINE`` is cut), and whether more follow: ``logs --json`` in
    pages, so a week's output is never one answer. ``final``: the run has stopped, so an
    unfinished last line counts. Raises ``OutputUnreadableError``."""
    lines: list[str] = []
    for number, line in enumerate(_every_line(path, final), start=1):
        if number <= after:
            continue
        if len(lines) == limit:
            return lines, True
        lines.append(line)
    return lines, False
