"""Follow one run as its record grows: new events, the run folded so far, its status.

The UI keeps one ``RunFollower`` per run it watches. Each ``poll`` reads only
the lines appended since the last one (``EventTail``) and folds them onto the
run read so far (``RunFold``), so a run appending many events a second costs
what it appended, not the length of its record. Status is checked against
liveness on every poll, so a killed run turns ``interrupted`` the moment it is
looked at. What the flow printed (``output.log``) is followed the same way:
from its last lines onward, only what was appended. A big record is taken up from its
cached fold (``folded``) and its last ``keep`` events, read from its end: opening a
week-long run never folds its record from the start (docs/reliability.md).
"""

from __future__ import annotations

import copy
import os
import threading
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from flowdrop_tui.core.errors import NotFoundError, OutputUnreadableError
from flowdrop_tui.core.files.regular import open_regular
from flowdrop_tui.core.paths import CYCLE, OUTPUT, Layout
from flowdrop_tui.core.records.log.event_lines import last_events
from flowdrop_tui.core.records.log.output_log import OutputTail
from flowdrop_tui.core.records.log.tail import EventTail
from flowdrop_tui.core.records.run_record import folded
from flowdrop_tui.core.records.run_record.run_fold import RunFold, derive_status
from flowdrop_tui.core.records.run_record.run_info import LIVE, RunInfo, Status

OUTPUT_KEEP = 200  # lines of output kept for a ``history`` poll


@dataclass
class RunUpdate:
    """What one poll of a run found. ``info`` is a copy: safe to hand to another thread."""

    run_id: str
    info: RunInfo
    events: list[dict[str, Any]] = field(default_factory=list)  # new, oldest first
    restarted: bool = False  # the record was replaced: earlier events no longer hold
    dropped: int = 0  # new events left out of ``events`` (only the newest ``keep`` are kept)
    previous: Status | None = None  # the status at the previous poll (None: first poll)
    output: list[str] = field(default_factory=list)  # new lines of output.log, oldest first
    output_restarted: bool = False  # output.log was replaced: earlier lines no longer hold
    output_error: str | None = None  # why output.log cannot be read (a link, not a file)


class RunFollower:
    """One run, read incrementally. ``poll`` is thread-safe and serialised."""

    def __init__(
        self, layout: Layout, run_id: str, *, keep: int = 2000, output: bool = True
    ) -> None:
        self.layout = layout
        self.run_dir = layout.run_dir(run_id)
        self.run_id = run_id
        self.keep = keep
        self.lock = threading.Lock()
        self._tail = EventTail(self.run_dir / CYCLE)
        self._fold = RunFold(run_id, self.run_dir)
        self._recent: deque[dict[str, Any]] = deque(maxlen=keep)
        self._status: Status | None = None
        self._output = OutputTail(self.run_dir / OUTPUT, last=OUTPUT_KEEP) if output else None
        self._output_recent: deque[str] = deque(maxlen=OUTPUT_KEEP)

    def poll(self, *, history: bool = False) -> RunUpdate:
        """Everything appended since the last poll, and the run as it now stands;
        ``history``: the ``keep`` most recent events instead of only the new ones.

        Hold ``lock`` around a poll *and* whatever the caller does with its result
        when the order of updates matters (the UI posts them in order)."""
        if not self.run_dir.is_dir():
            raise NotFoundError(f"no run {self.run_id} in {self.run_dir.parent}")
        new: deque[dict[str, Any]] = deque(maxlen=self.keep)
        restarted = False
        seen = 0
        if self._tail.offset == 0:
            seen = self._from_cache(new)
        while True:
            read = self._tail.read()
            if read.restarted:
                restarted = True
                new.clear()
                self._recent.clear()
                seen = 0
                self._fold = RunFold(self.run_id, self.run_dir)
            self._fold.feed(read.events)
            new.extend(read.events)
            self._recent.extend(read.events)
            seen += len(read.events)
            if not read.more:
                break
        info = derive_status(self._fold.info)
        events = list(self._recent if history else new)
        update = RunUpdate(
            run_id=self.run_id,
            info=copy.deepcopy(info),
            events=events,
            restarted=restarted,
            dropped=(info.events if history else seen) - len(events),
            previous=self._status,
        )
        self._status = info.status
        self._read_output(update, history)
        return update

    def _from_cache(self, new: deque[dict[str, Any]]) -> int:
        """A big record taken up from its cached fold and its last ``keep`` events before
        the offset the fold covers; how many events that skips to (0: none cached)."""
        try:
            fd = open_regular(self.run_dir / CYCLE)
        except OSError:
            return 0
        try:
            stat = os.fstat(fd)
            if stat.st_size < folded.CACHE_MIN:
                return 0
            identity = [stat.st_dev, stat.st_ino]
            kept = folded.restore(self.layout, self.run_id, self.run_dir, identity, stat.st_size)
            if kept is None:
                return 0
            recent = last_events(fd, kept.offset, self.keep)
        except OSError:
            return 0
        finally:
            os.close(fd)
        self._fold.info, self._fold.in_round_main = kept.info, kept.in_round_main
        self._tail.start_at(kept.offset, (identity[0], identity[1]))
        new.extend(recent)
        self._recent.extend(recent)
        return kept.info.events

    def _read_output(self, update: RunUpdate, history: bool) -> None:
        """After the status: once a run is seen stopped, all it printed is on disk, so an
        unfinished last line is shown too."""
        if self._output is None:
            return
        try:
            read = self._output.read_all(final=update.info.status not in LIVE)
        except OutputUnreadableError as exc:
            update.output_error = exc.message
            return
        if read.restarted:
            self._output_recent.clear()
        self._output_recent.extend(read.lines)
        update.output_restarted = read.restarted
        update.output = list(self._output_recent) if history else read.lines[-OUTPUT_KEEP:]
