"""What is known of each run without folding its record: its key, whether and when it
ended, and the bytes it holds on disk — learnt once per ended run and kept.

A run that has ended never changes again, so its facts are kept in
``.flowdrop/cache/runs.json`` and never read from its record a second time: the
workspace's size (the ``flows`` footer, the UI header) and ``prune``'s grouping of
runs by flow then cost a ``listdir`` and one cached read, whatever the number of
runs. A run not yet known is classified cheaply: its first line (``created``: the
key) and its last line — a last event ``ended`` is a terminal run, by the fold's
own rule (nothing follows ``ended``); anything else is folded and checked for
liveness, as ``load_run`` does. The cache is an accelerator only: ``prune`` asks
with ``checked=True``, which reads each run's ``created`` event again (one small
read) and takes its key from there, relearning any run whose kept key disagrees
(a forged or stale cache never moves a run into another flow); and it checks each
run it deletes against its record again (``retention``).
"""

from __future__ import annotations

import os
import signal
import stat
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from flowdrop_tui.core.child_read import child_output, never
from flowdrop_tui.core.errors import FlowdropError
from flowdrop_tui.core.files.atomic import write_atomic
from flowdrop_tui.core.files.regular import open_regular, read_regular
from flowdrop_tui.core.paths import CYCLE, RUN_ID_RE, Layout
from flowdrop_tui.core.records.log.event_lines import parse_lines, read_first_event
from flowdrop_tui.core.records.run_record.run_fold import list_run_ids, load_run
from flowdrop_tui.core.records.run_record.run_info import ENDED, TERMINAL, Status
from flowdrop_tui.core.records.run_record.trash import keeps_transcripts, linked_transcripts

LEDGER_VERSION = 1
_TAIL = 8192
SAVE_EVERY = 2.0  # seconds: a cold ledger is kept as it is learnt, not only at the end


@dataclass(frozen=True)
class RunFacts:
    """A run as ``prune`` and the size footer need it."""

    run: str
    key: str | None  # None: no readable ``created`` event
    status: Status
    ended: str | None  # when it ended (its last event's time), for an ended run
    bytes: int  # its files' sizes: its folder and the transcripts it links under .flowdrop/
    # From its ``created`` event, when read (``classify``, or ``facts(checked=True)``):
    source: str | None = None  # the run it picked up from
    replaced: str | None = None  # the key's head an unresolved --resume looked past


@dataclass(frozen=True)
class Created:
    """What prune needs of a run's ``created`` event: its key and its links."""

    key: str | None  # None: no readable ``created`` event
    source: str | None
    replaced: str | None


def created_of(layout: Layout, run_id: str) -> Created:
    """The run's ``created`` event, read from its record (its first line)."""
    first = read_first_event(layout.runs / run_id / CYCLE)
    if first is None or first.get("event") != "created":
        return Created(None, None, None)

    def text(name: str) -> str | None:
        value = first.get(name)
        return value if isinstance(value, str) else None

    replaced = text("replaced")
    return Created(
        text("key"), text("source"), replaced if replaced and RUN_ID_RE.match(replaced) else None
    )


def last_event(path: Path) -> dict[str, Any] | None:
    """The last whole event of a ``cycle.jsonl``, reading only its tail."""
    try:
        with os.fdopen(open_regular(path), "rb") as handle:  # never a FIFO or a device
            size = os.fstat(handle.fileno()).st_size
            handle.seek(max(0, size - _TAIL))
            tail = handle.read()
    except OSError:
        return None
    events = parse_lines(tail if size <= _TAIL else tail[tail.find(b"\n") + 1 :])
    return events[-1] if events else None


def _bytes(path: str) -> int:
    """A file's size; 0 for a folder or a link. What the files hold, not the blocks the
    file system gives them: the same figure on every file system."""
    try:
        found = os.lstat(path)
    except OSError:
        return 0
    return found.st_size if stat.S_ISREG(found.st_mode) else 0


def disk_bytes(layout: Layout, run_id: str) -> int:
    """A run's folder (never following a link) plus its transcripts under .flowdrop/."""
    folder = layout.runs / run_id
    total = _bytes(str(folder))
    stack = [str(folder)]
    while stack:
        try:
            entries = list(os.scandir(stack.pop()))
        except OSError:
            continue
        for entry in entries:
            total += _bytes(entry.path)
            if entry.is_dir(follow_symlinks=False):
                stack.append(entry.path)
    if keeps_transcripts(layout):
        total += sum(_bytes(str(t)) for t in linked_transcripts(layout, folder, run_id))
    return total


def classify(layout: Layout, run_id: str) -> RunFacts:
    """One run's facts, from its first and last lines (folded only when not ended)."""
    path = layout.runs / run_id / CYCLE
    created = created_of(layout, run_id)
    key = created.key
    last = last_event(path)
    if key is not None and last is not None and last["event"] == "ended":
        outcome = last.get("outcome")
        status = Status(outcome) if outcome in {str(s) for s in TERMINAL} else Status.FAILED
        ended = last.get("t")
    else:
        try:
            info = load_run(layout, run_id)
        except FlowdropError:
            return RunFacts(run_id, key, Status.PENDING, None, 0, created.source, created.replaced)
        status = info.status
        ended = info.ended
        if status == Status.INTERRUPTED and last is not None:
            ended = last.get("t")
    ended = ended if isinstance(ended, str) else None
    size = disk_bytes(layout, run_id) if status in ENDED else 0
    return RunFacts(run_id, key, status, ended, size, created.source, created.replaced)


class Ledger:
    """The kept facts of ended runs; ``facts`` learns the runs it does not know yet."""

    def __init__(self, layout: Layout) -> None:
        self.layout = layout
        self.path = layout.cache / "runs.json"
        self._known: dict[str, list[Any]] = {}
        self._dirty = False
        self._saved = time.monotonic()
        self.disagreed: list[str] = []  # runs whose kept key their record contradicted
        try:
            data = orjson.loads(read_regular(self.path))
        except (OSError, orjson.JSONDecodeError):
            return
        if isinstance(data, dict) and data.get("v") == LEDGER_VERSION:
            runs = data.get("runs")
            if isinstance(runs, dict):
                self._known = {k: v for k, v in runs.items() if _valid(k, v)}

    def facts(self, run_ids: list[str], *, checked: bool = False) -> dict[str, RunFacts]:
        """Facts for every run in ``run_ids``; the ones not kept are classified now.
        ``checked``: every run's key (and links) from its own ``created`` event, the kept
        ones included; a kept key the record contradicts is dropped and relearnt."""
        found: dict[str, RunFacts] = {}
        for run_id in run_ids:
            kept = self._known.get(run_id)
            if kept is not None and checked:
                created = created_of(self.layout, run_id)
                if created.key != kept[0]:
                    self.disagreed.append(run_id)
                    self.forget([run_id])
                    kept = None
                else:
                    _, status, ended, size = kept
                    found[run_id] = RunFacts(
                        run_id,
                        created.key,
                        Status(status),
                        ended,
                        size,
                        created.source,
                        created.replaced,
                    )
                    continue
            if kept is not None:
                key, status, ended, size = kept
                found[run_id] = RunFacts(run_id, key, Status(status), ended, size)
                continue
            facts = classify(self.layout, run_id)
            found[run_id] = facts
            if facts.status in ENDED and facts.key is not None:
                self._known[run_id] = [facts.key, str(facts.status), facts.ended, facts.bytes]
                self._dirty = True
                if time.monotonic() - self._saved > SAVE_EVERY:
                    self.save()  # killed meanwhile (the UI quit): the next read goes on
        return found

    def forget(self, run_ids: list[str] | set[str]) -> None:
        for run_id in run_ids:
            if self._known.pop(run_id, None) is not None:
                self._dirty = True

    def save(self, present: list[str] | None = None) -> None:
        """Write the ledger back (only runs still ``present``, when given); best effort."""
        if present is not None:
            here = set(present)
            gone = [run_id for run_id in self._known if run_id not in here]
            self.forget(gone)
        if not self._dirty:
            return
        try:
            self.layout.folder(self.layout.cache)  # never through a link (a planted cache/)
            data = orjson.dumps({"v": LEDGER_VERSION, "runs": self._known})
            write_atomic(self.path, data, durable=False)  # a cache: losing it costs a re-read
        except OSError:
            return
        self._dirty = False
        self._saved = time.monotonic()


def _valid(run_id: Any, value: Any) -> bool:
    return (
        isinstance(run_id, str)
        and RUN_ID_RE.match(run_id) is not None
        and isinstance(value, list)
        and len(value) == 4
        and isinstance(value[0], str)
        and value[1] in {str(s) for s in ENDED}
        and (value[2] is None or isinstance(value[2], str))
        and type(value[3]) is int
    )


@dataclass(frozen=True)
class Usage:
    """How big the workspace's records are: what the ``flows`` footer and the UI show."""

    runs: int
    bytes: int  # runs' folders and every file under .flowdrop/transcripts


def workspace_usage(layout: Layout) -> Usage:
    """Runs and disk used, from the ledger: a ``listdir`` for ended runs already known;
    runs not ended yet (few) are measured each time."""
    ids = list_run_ids(layout)
    ledger = Ledger(layout)
    try:
        facts = ledger.facts(ids)
    except BaseException:
        ledger.save()  # stopped part way (SIGTERM: the UI quit): the next count goes on
        raise
    total = 0
    for run_id, fact in facts.items():
        total += fact.bytes if fact.status in ENDED else disk_bytes(layout, run_id)
    ledger.save(ids)
    total += _orphan_bytes(layout, set(ids))
    return Usage(len(ids), total)


def _orphan_bytes(layout: Layout, run_ids: set[str]) -> int:
    """Transcripts not named after a run that exists (the runs' own are counted with them)."""
    if not keeps_transcripts(layout):
        return 0
    total = 0
    try:
        names = os.listdir(layout.transcripts)
    except OSError:
        return 0
    for name in names:
        if name[:27] not in run_ids:
            total += _bytes(str(layout.transcripts / name))
    return total


def isolated_usage(layout: Layout, cancelled: Callable[[], bool] = never) -> Usage | None:
    """``workspace_usage`` in a child process, for the UI: learning a large workspace's
    runs the first time reads thousands of files, which must not hold the UI's GIL.
    ``None`` on failure, or once ``cancelled()`` (the child is killed: quitting never
    waits for it; what it learnt so far is kept, ``Ledger.facts`` saves as it goes)."""
    command = [
        sys.executable,
        "-m",
        "flowdrop_tui.core.records.listing.ledger",
        str(layout.workspace),
    ]
    out = child_output(command, timeout=300, cancelled=cancelled)
    try:
        answer = orjson.loads(out or b"")
        return Usage(int(answer["runs"]), int(answer["bytes"]))
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
        return None


if __name__ == "__main__":
    os.nice(10)  # a background measurement: the UI (and its runs) come first
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
    used = workspace_usage(Layout(Path(sys.argv[1])))
    sys.stdout.buffer.write(orjson.dumps({"runs": used.runs, "bytes": used.bytes}))
