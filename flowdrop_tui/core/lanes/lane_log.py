"""What happened to a lane after its runs (SPEC §23): landed, archived, dropped.

A run that has ended never changes again (``records/listing/ledger.py`` keeps its
facts on that promise), so what a person later does to a lane is not appended to its
runs' records but to the lane's own log: ``.flowdrop/lanes/<key>.jsonl``, one whole
JSON line per event (``{"t", "event", …}``), appended with one ``O_APPEND`` write and
synced before the command says it is done; a torn last line (a power cut) is skipped.
An archive's files go beside it, in ``.flowdrop/lanes/<key>.archive/<stamp>/``.
``prune`` never deletes either: they are what says where a lane's work went."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import orjson

from flowdrop_tui.core.files.atomic import datasync, open_fd, sync_dir
from flowdrop_tui.core.files.regular import read_regular
from flowdrop_tui.core.paths import Layout, key_filename
from flowdrop_tui.core.records.log.event_lines import parse_lines
from flowdrop_tui.core.times import now_iso

SUFFIX = ".jsonl"


def folder(layout: Layout) -> Path:
    """``.flowdrop/lanes/``, made when missing (never through a link)."""
    return layout.folder(layout.root / "lanes")


def path_of(layout: Layout, key: str) -> Path:
    return layout.root / "lanes" / key_filename(key, SUFFIX)


def archive_folder(layout: Layout, key: str, stamp: str) -> Path:
    """A new folder for one archive of ``key`` (``stamp``: its time, file-name safe)."""
    where = folder(layout) / key_filename(key, ".archive") / stamp
    return layout.folder(where)


def append(layout: Layout, key: str, event: str, **fields: Any) -> dict[str, Any]:
    """Append ``event`` to the lane's log, durably; the event as written."""
    record = {"t": now_iso(), "event": event, "key": key, **fields}
    line = orjson.dumps(record) + b"\n"
    place = folder(layout)
    path = path_of(layout, key)
    made = not path.exists()
    fd = open_fd(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW)
    try:
        os.write(fd, line)
        datasync(fd)
    finally:
        os.close(fd)
    if made:
        sync_dir(place)
    return record


def events(layout: Layout, key: str) -> list[dict[str, Any]]:
    """The lane's log, oldest first; none when it has none (or it is unreadable)."""
    try:
        return parse_lines(read_regular(path_of(layout, key), None))
    except OSError:
        return []


def last(layout: Layout, key: str, event: str) -> dict[str, Any] | None:
    """The lane's newest ``event``, or ``None``."""
    for record in reversed(events(layout, key)):
        if record.get("event") == event:
            return dict(record)
    return None
