"""A file made apart: no other file of its folder has its inode in the same block.

On ext4 without a journal, ``fdatasync`` of a file also writes the block of the inode
table its inode is in whenever anything in that block changed since
(``ext4_fsync_nojournal`` writes the inode's block), and a 4 KiB block holds 16 inodes.
A run's files are made together, so their inodes are neighbours: ``state.json``, its
spare and the run's folder change at every key set (the swap), and the state log's
flush wrote their block each time too — 45 µs of a 100 µs flush (bench/README.md (a)).
The state log is made here: candidates are made until one's inode number is in a block
— counted as 32 inodes, so 128-byte inodes too — holding none of the folder's entries
nor the folder, the others removed. Elsewhere (a journal, xfs, btrfs, tmpfs) the first
candidate is kept nearly always, and where it is not nothing is lost but a few
microseconds.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable
from pathlib import Path

from flowdrop_tui.core.files.atomic import open_fd

PER_BLOCK = 32  # inodes counted per block: two blocks of 256-byte inodes, one of 128
_TRIES = 40  # one block of candidates and some: enough to step past any


def block_of(ino: int) -> int:
    return (ino - 1) // PER_BLOCK


def create_apart(path: Path, flags: int, also: Iterable[int] = ()) -> int:
    """Make ``path`` (which must not exist) on an inode apart from its folder's other
    files and the inodes ``also``; its descriptor (``open_fd(path, flags | O_CREAT |
    O_EXCL)``)."""
    folder = path.parent
    try:
        near = {block_of(os.stat(folder).st_ino), *(block_of(ino) for ino in also if ino)}
        with os.scandir(folder) as entries:
            near.update(block_of(entry.inode()) for entry in entries)
    except OSError:
        near = set()
    tried: list[Path] = []
    try:
        for n in range(_TRIES):
            candidate = path.with_name(f"{path.name}.new-{n}")
            with contextlib.suppress(FileNotFoundError):
                os.unlink(candidate)  # left by a process killed right here
            fd = open_fd(candidate, flags | os.O_CREAT | os.O_EXCL)
            tried.append(candidate)
            if block_of(os.fstat(fd).st_ino) in near and n < _TRIES - 1:
                os.close(fd)  # kept until the end, so the next candidate is another inode
                continue
            try:
                os.rename(candidate, path)
            except BaseException:
                os.close(fd)
                raise
            tried.pop()
            return fd
    finally:
        for candidate in tried:
            with contextlib.suppress(OSError):
                os.unlink(candidate)
    raise AssertionError("unreachable: the last candidate is always kept")
