"""Reading a record file that may not be one: never hang, never read without end.

Anything can be planted where a record file goes (``state.json``, ``cycle.jsonl``,
``index.json``, ``keys/*.runs``, a cache): a FIFO made a plain ``open`` wait for a
writer that never comes (``run`` holding its key's lock meanwhile, ``flows`` and the
UI for good), and a link to ``/dev/zero`` made ``read()`` grow without bound (7.4 GB
in 4 s). So every record file is opened here: ``O_NONBLOCK`` (opening a FIFO returns
at once), then ``fstat`` on the descriptor — only a regular file is read; anything
else is ``NotRegularFile``, an ``OSError`` that says so, which every reader already
treats as "cannot be read" (a cache is rebuilt, a state refused naming the file, a
record shown as unreadable). A file that should be small is read up to a cap.

Links are followed for *reading* (a paused record's link must still be read to be
refused by name when it is written: ``folder.refuse_links``); what they lead to must
be a regular file all the same. Writing never follows one (``paths.inside``).
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from flowdrop_tui.core.files.atomic import open_fd

# The most read of a file the engine keeps small (an index, a key's run list, a cache,
# a request): far above anything it writes, far below what would hurt.
SMALL_FILE = 256 << 20


class NotRegularFile(OSError):
    """A record file that is a FIFO, a device, a socket or a folder: never read."""

    def __init__(self, path: Path | str, mode: int) -> None:
        what = _kind(mode)
        super().__init__(
            errno.EINVAL,
            f"not a regular file ({what}); the engine reads only regular files in its "
            "records — put the real file back, or remove it",
            os.fspath(path),
        )


class TooBig(OSError):
    """A file the engine keeps small that is larger than it ever writes."""

    def __init__(self, path: Path | str, size: int, cap: int) -> None:
        super().__init__(
            errno.EFBIG,
            f"larger ({size} bytes) than the {cap} bytes the engine ever writes there",
            os.fspath(path),
        )


def _kind(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISDIR(mode):
        return "a folder"
    return "not a file"


def open_regular(path: Path | str) -> int:
    """A read-only descriptor of ``path``, only when it is a regular file; never waits."""
    fd = open_fd(path, os.O_RDONLY | os.O_NONBLOCK)
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise NotRegularFile(path, mode)
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_regular(path: Path | str, cap: int | None = SMALL_FILE) -> bytes:
    """The whole of a regular file; ``TooBig`` past ``cap`` (a file the engine keeps
    small). ``None``: no cap (a state is as big as the flow made it) — a regular file
    ends all the same; one growing while read is read to the size it had."""
    fd = open_regular(path)
    try:
        size = os.fstat(fd).st_size
        if cap is not None and size > cap:
            raise TooBig(path, size, cap)
        want = size if cap is None else cap + 1  # one past the cap: a file grown past it
        chunks = []
        total = 0
        while total < want:
            data = os.read(fd, min(1 << 20, want - total))
            if not data:
                break
            chunks.append(data)
            total += len(data)
        if cap is not None and total > cap:
            raise TooBig(path, total, cap)
        return b"".join(chunks)
    finally:
        os.close(fd)
