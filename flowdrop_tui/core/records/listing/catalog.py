"""A flow's runs for a screen that asks again each time the cursor moves.

The ids come from the key's run list (``key_runs``: its newest page, read from
the end of one file), so asking costs the page, never the workspace. Runs that
have ended never change again: each is folded once and kept.
"""

from __future__ import annotations

import threading

from flowdrop_tui.core.errors import FlowdropError
from flowdrop_tui.core.paths import Layout
from flowdrop_tui.core.records.listing import index, key_runs
from flowdrop_tui.core.records.run_record.run_fold import (
    load_run,  # a big record: only what it appended
)
from flowdrop_tui.core.records.run_record.run_info import ENDED, RunInfo


class RunCatalog:
    """Folded runs by key, for one workspace. Thread-safe."""

    def __init__(self, layout: Layout) -> None:
        self.layout = layout
        self._lock = threading.Lock()
        self._ended: dict[str, RunInfo] = {}

    def count(self, key: str) -> int:
        """How many runs the key has had (a page may show fewer)."""
        index.key_runs_caught_up(self.layout, key)  # a list a power cut left behind
        return key_runs.count(self.layout, key)

    def ids_of(self, key: str, limit: int | None = None, before: str | None = None) -> list[str]:
        """The key's runs, newest first (at most ``limit``, older than ``before``)."""
        index.key_runs_caught_up(self.layout, key)  # a list a power cut left behind
        return key_runs.newest(self.layout, key, limit, before)

    def runs_of(
        self, key: str, limit: int | None = None, before: str | None = None
    ) -> list[RunInfo]:
        """The key's runs folded, newest first; a record that cannot be read is left out."""
        found = []
        for run_id in self.ids_of(key, limit, before):
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
