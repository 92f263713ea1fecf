"""Which runs belong to which key, learnt once per run.

``views.run_rows(layout, key)`` reads the first line of every run to pick out
one key's runs: right for a command that runs once, too slow for a UI that
shows a flow's runs each time the cursor moves, in a workspace of 10,000 runs.
The catalog reads each run's first line once, learns new runs as they appear,
and keeps the folded record of runs that have ended (they never change again).
"""

from __future__ import annotations

import threading

from flowdrop_tui.core.errors import FlowdropError
from flowdrop_tui.core.paths import CYCLE, Layout
from flowdrop_tui.core.records.events import (
    ENDED,
    RunInfo,
    list_run_ids,
    load_run,
    read_first_event,
)


class RunCatalog:
    """Run ids by key, for one workspace. Thread-safe."""

    def __init__(self, layout: Layout) -> None:
        self.layout = layout
        self._lock = threading.Lock()
        self._key_of: dict[str, str | None] = {}
        self._by_key: dict[str | None, list[str]] = {}
        self._ended: dict[str, RunInfo] = {}

    def refresh(self) -> list[str]:
        """Learn the runs that appeared since the last refresh; returns their ids."""
        ids = list_run_ids(self.layout)
        with self._lock:
            new = [run_id for run_id in ids if run_id not in self._key_of]
            gone = set(self._key_of).difference(ids) if len(ids) < len(self._key_of) else set()
        learnt = [(run_id, self._first_key(run_id)) for run_id in new]
        with self._lock:
            for run_id in gone:
                self._forget(run_id)
            for run_id, key in learnt:
                if run_id not in self._key_of:
                    self._key_of[run_id] = key
                    self._by_key.setdefault(key, []).append(run_id)
            for runs in self._by_key.values():
                runs.sort()
        return new

    def _first_key(self, run_id: str) -> str | None:
        first = read_first_event(self.layout.runs / run_id / CYCLE)
        if first is None or first.get("event") != "created":
            return None
        key = first.get("key")
        return key if isinstance(key, str) else None

    def _forget(self, run_id: str) -> None:
        key = self._key_of.pop(run_id, None)
        runs = self._by_key.get(key)
        if runs is not None and run_id in runs:
            runs.remove(run_id)
        self._ended.pop(run_id, None)

    def count(self, key: str) -> int:
        with self._lock:
            return len(self._by_key.get(key, ()))

    def ids_of(self, key: str, limit: int | None = None) -> list[str]:
        """The key's runs, newest first (at most ``limit``)."""
        with self._lock:
            runs = self._by_key.get(key, [])
            newest = runs[::-1] if limit is None else runs[: -limit - 1 : -1]
        return newest

    def runs_of(self, key: str, limit: int | None = None) -> list[RunInfo]:
        """The key's runs folded, newest first; a record that cannot be read is left out."""
        found = []
        for run_id in self.ids_of(key, limit):
            info = self.info(run_id)
            if info is not None and info.key == key:
                found.append(info)
        return found

    def info(self, run_id: str) -> RunInfo | None:
        """One run folded; ended runs are read once and kept."""
        with self._lock:
            cached = self._ended.get(run_id)
        if cached is not None:
            return cached
        try:
            info = load_run(self.layout, run_id)
        except FlowdropError:
            return None
        if info.status in ENDED:
            with self._lock:
                self._ended[run_id] = info
        return info
