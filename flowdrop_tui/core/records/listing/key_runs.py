"""Each key's runs in the order they were made: ``.flowdrop/keys/<key>.runs``, one id a line.

``runs FLOW`` shows a flow's newest page of runs. Picking them out of every run
in the workspace (reading each one's first line) costs time in proportion to
the whole workspace; this list makes it cost the page: the newest ids are the
last lines of the key's file, read from its end.

It is a cache of the records, kept like the index: a run's id is appended under
the index lock *before* its record is renamed into place, with one ``O_APPEND``
write, so a kill leaves at most an id whose record never appeared (readers skip
ids whose folder is gone) and never a run the list misses. A key whose list is
missing has it rebuilt from the records the first time it is needed, and
``reindex`` rebuilds them all. Anything but a regular file at a list's name (a
folder, a FIFO, a link planted there) counts as missing: it is set aside under
``keys/`` (renamed, never deleted or followed), the list is rebuilt, and the move is
said (``take_notes``: ``runs`` prints it), so ``runs KEY`` never says "no runs yet"
of a key that has runs.
"""

from __future__ import annotations

import contextlib
import os
import stat
import time
from collections.abc import Iterator
from pathlib import Path

from flowdrop_tui.core.files import locks
from flowdrop_tui.core.files.atomic import datasync, write_atomic
from flowdrop_tui.core.files.regular import open_regular, read_regular
from flowdrop_tui.core.paths import CYCLE, RUN_ID_RE, Layout, key_filename
from flowdrop_tui.core.records.log.event_lines import read_first_event
from flowdrop_tui.core.records.run_record.run_fold import list_run_ids

SUFFIX = ".runs"
_LINE = 28  # a run id (27 characters) and its newline
_CHUNK = 64 * _LINE


_notes: list[str] = []  # what was set aside in this process, for the command to say


def path_of(layout: Layout, key: str) -> Path:
    return layout.keys / key_filename(key, SUFFIX)


def _is_list(path: Path) -> bool:
    """A regular file there (never following a link)."""
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


def _set_aside(layout: Layout, path: Path) -> None:
    """Something that is not a regular file at a list's name: renamed out of the way
    (kept for a person to look at), said, and the list made again by the caller."""
    try:
        kind = stat.filemode(os.lstat(path).st_mode)[0]
    except FileNotFoundError:
        return
    aside = path.with_name(f"{path.name}.not-a-file-{time.time_ns()}")
    layout.inside(layout.keys)  # the folder: no link on the way (the name itself may be one)
    os.rename(path, aside)  # renames a link itself, never what it points to
    what = {"d": "a folder", "l": "a link", "p": "a FIFO"}.get(kind, "not a regular file")
    _notes.append(
        f"{path} was {what}, not a run list: set aside as {aside.name} and rebuilt from the records"
    )


def take_notes() -> list[str]:
    """What this process set aside since the last call (``runs`` says it on stderr)."""
    said = list(_notes)
    _notes.clear()
    return said


def _key_of(layout: Layout, run_id: str) -> str | None:
    first = read_first_event(layout.runs / run_id / CYCLE)
    if first is None or first.get("event") != "created":
        return None
    key = first.get("key")
    return key if isinstance(key, str) else None


def _scan(layout: Layout) -> dict[str, list[str]]:
    """Every key's runs, oldest first, as the records say (one first line per run)."""
    by_key: dict[str, list[str]] = {}
    for run_id in list_run_ids(layout):
        key = _key_of(layout, run_id)
        if key is not None:
            by_key.setdefault(key, []).append(run_id)
    return by_key


def _write(layout: Layout, key: str, ids: list[str]) -> None:
    layout.inside(layout.keys)  # (a link at the file itself is replaced: write_atomic)
    write_atomic(path_of(layout, key), "".join(f"{run_id}\n" for run_id in ids).encode())


def rebuild_locked(layout: Layout) -> None:
    """Every key's list from the records (``reindex``). Call under the index lock."""
    by_key = _scan(layout)
    layout.inside(layout.keys)
    with contextlib.suppress(OSError):
        for name in os.listdir(layout.keys):
            if name.endswith(SUFFIX):
                if _is_list(layout.keys / name):
                    (layout.keys / name).unlink()
                else:
                    _set_aside(layout, layout.keys / name)
    for key, ids in by_key.items():
        _write(layout, key, ids)


def compact_locked(layout: Layout, keys: set[str]) -> None:
    """Drop from ``keys``' lists the ids whose record is gone (after a prune), so that
    counts are right and pages do not walk past them. Call under the index lock."""
    for key in keys:
        path = path_of(layout, key)
        try:
            ids = read_regular(path).decode("ascii", "replace").split()
        except OSError:
            continue
        kept = [run_id for run_id in ids if (layout.runs / run_id).is_dir()]
        if len(kept) != len(ids):
            _write(layout, key, kept)


def _ensure_locked(layout: Layout, key: str) -> None:
    path = path_of(layout, key)
    if not _is_list(path):
        if os.path.lexists(path):
            _set_aside(layout, path)
        _write(layout, key, _scan(layout).get(key, []))


def append_locked(layout: Layout, key: str, run_id: str, *, durable: bool = True) -> None:
    """A new run of ``key``, before its record appears. Call under the index lock.

    ``durable``: synced before the record is made, so a run reported started is never
    missing from its list after a power cut (docs/decisions.md, "Durability"; a
    replica's lists are not: it is rebuilt from its server, and ``catch_up`` repairs a
    list behind the index)."""
    _ensure_locked(layout, key)
    # O_NONBLOCK: a FIFO planted there fails at once (ENXIO) instead of waiting for a reader
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK
    fd = os.open(layout.inside(path_of(layout, key)), flags, 0o644)
    try:
        os.write(fd, f"{run_id}\n".encode())
        if durable:
            datasync(fd)
    finally:
        os.close(fd)


def _tail(layout: Layout, key: str) -> str | None:
    """The newest run id the key's list holds (a tail of zeros a power cut left skipped)."""
    for line in _lines_from_end(path_of(layout, key)):
        if RUN_ID_RE.match(line):
            return line
    return None


def catch_up(layout: Layout, key: str, last_run: str) -> None:
    """Rebuild ``key``'s list when it is behind ``last_run``, the key's last run as the
    index says (durable before any record appears): a list that lost its newest lines
    (a power cut on a list written before its lines were synced, a replica's) would
    otherwise hide those runs until ``reindex``. Costs one read of the list's end; the
    rebuild (one first line per run) happens once, when a list is found behind."""
    if RUN_ID_RE.match(last_run) is None or not _is_list(path_of(layout, key)):
        return  # a missing list is made from the records when first needed (_ensure)
    tail = _tail(layout, key)
    if tail is not None and tail >= last_run:
        return
    if _key_of(layout, last_run) != key:
        return  # a run that called this key (not one of its own), or gone
    try:
        with locks.exclusive(layout.index_lock, wait=1.0):  # as index.READ_WAIT
            tail = _tail(layout, key)
            if tail is None or tail < last_run:
                _write(layout, key, _scan(layout).get(key, []))
    except OSError:
        return  # read-only or the lock held: the page is read as it is


def _ensure(layout: Layout, key: str) -> bool:
    """Make sure ``key`` has a list; False when it cannot be made (read-only workspace)."""
    if _is_list(path_of(layout, key)):
        return True
    try:
        layout.ensure()
        with locks.exclusive(layout.index_lock, wait=1.0):  # as index.READ_WAIT
            _ensure_locked(layout, key)
    except OSError:
        return False
    return True


def _lines_from_end(path: Path) -> Iterator[str]:
    """The file's whole lines, last first, read in chunks from its end."""
    try:
        handle = os.fdopen(open_regular(path), "rb")  # never a FIFO or a device
    except OSError:
        return
    with handle:
        end = handle.seek(0, os.SEEK_END)
        rest = b""
        while end > 0:
            start = max(0, end - _CHUNK)
            handle.seek(start)
            block = handle.read(end - start) + rest
            end = start
            lines = block.split(b"\n")
            rest = lines.pop(0) if start > 0 else b""
            for line in reversed(lines):
                if line:
                    yield line.decode("ascii", "replace")
        if rest:
            yield rest.decode("ascii", "replace")


def _newest_in(
    layout: Layout, lines: Iterator[str], limit: int | None, before: str | None
) -> list[str]:
    found: list[str] = []
    seen: set[str] = set()
    for run_id in lines:
        if limit is not None and len(found) >= limit:
            break
        if RUN_ID_RE.match(run_id) is None or (before is not None and run_id >= before):
            continue
        if run_id not in seen and (layout.runs / run_id).is_dir():
            seen.add(run_id)
            found.append(run_id)
    return found


def newest(
    layout: Layout, key: str, limit: int | None = None, before: str | None = None
) -> list[str]:
    """The key's runs, newest first: at most ``limit``, older than ``before`` when given.

    Ids whose record is gone (pruned, or a creation that was killed) are skipped.
    """
    if not _ensure(layout, key):
        return _newest_in(layout, reversed(_scan(layout).get(key, [])), limit, before)
    return _newest_in(layout, _lines_from_end(path_of(layout, key)), limit, before)


def newer(layout: Layout, key: str, than: str) -> list[str]:
    """The key's runs made after run ``than``, newest first (read from the list's end
    until ``than`` or an older id: a pick-up from an old run costs what came after it)."""
    if not _ensure(layout, key):
        lines: Iterator[str] = reversed(_scan(layout).get(key, []))
    else:
        lines = _lines_from_end(path_of(layout, key))
    found: list[str] = []
    for run_id in lines:
        if RUN_ID_RE.match(run_id) is None:
            continue
        if run_id <= than:
            break
        if run_id not in found and (layout.runs / run_id).is_dir():
            found.append(run_id)
    return found


def count(layout: Layout, key: str) -> int:
    """How many runs ``key`` has had (from the list's size; ids of pruned runs included)."""
    if not _ensure(layout, key):
        return len(_scan(layout).get(key, []))
    try:
        return path_of(layout, key).stat().st_size // _LINE
    except OSError:
        return 0
