"""What the UI keeps about the runs it follows — plain Python, no Textual.

One ``RunFollower`` per followed run (the selected one and every one seen live),
which runs were seen live (so their end or pause can be announced once), which
ones were asked to stop (the second escape stops now), and when each run's git
was last read (a git read is a child process: not one per round).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable
from typing import Any

from flowdrop_tui.core.paths import Layout
from flowdrop_tui.core.records.run_record.follow import RunFollower
from flowdrop_tui.core.records.run_record.run_info import LIVE, RunInfo
from flowdrop_tui.tui.labels import ended_text

GIT_EVENTS = frozenset({"round_ended", "paused", "ended"})  # when a run may have committed
GIT_EVERY = 5.0  # a live run's commits are read again at most this often (seconds)


class RunTracker:
    """Thread-safe where workers reach it (``follower``, ``git_due``)."""

    def __init__(self, layout: Layout) -> None:
        self.layout = layout
        self.live: set[str] = set()  # seen live (or launched) here: told when they end
        self.stop_asked: set[str] = set()
        self.git: dict[str, dict[str, Any] | None] = {}  # the last git read, by run
        self._followers: dict[str, RunFollower] = {}
        self._git_read_at: dict[str, float] = {}
        self._lock = threading.Lock()

    def follower(self, run_id: str) -> RunFollower:
        with self._lock:
            follower = self._followers.get(run_id)
            if follower is None:
                follower = self._followers[run_id] = RunFollower(self.layout, run_id)
            return follower

    def wanted(self, selected: str | None) -> set[str]:
        """The runs to watch closely; followers of the others are let go."""
        wanted = set(self.live) | ({selected} if selected else set())
        with self._lock:
            for run_id in set(self._followers) - wanted:
                del self._followers[run_id]
        return wanted

    def saw_live(self, run_ids: Iterable[str]) -> None:
        self.live.update(run_ids)

    def seen(self, info: RunInfo) -> tuple[bool, tuple[str, str] | None]:
        """Note the run's status: (whether the live set changed, a notice to show or None).

        A run seen live and now ended or paused is announced once, with the reason."""
        if info.status in LIVE:
            if info.run in self.live:
                return False, None
            self.live.add(info.run)
            return True, None
        if info.run not in self.live:
            return False, None
        self.live.discard(info.run)
        self.stop_asked.discard(info.run)
        return True, ended_text(info)

    def git_due(self, run_id: str, events: list[dict[str, Any]], history: bool) -> bool:
        """Whether to read the run's git again after these new events."""
        kinds = {ev.get("event") for ev in events}
        now = time.monotonic()
        with self._lock:
            due = now - self._git_read_at.get(run_id, 0.0) > GIT_EVERY
            read = (
                history or bool(kinds & {"paused", "ended"}) or (due and bool(kinds & GIT_EVENTS))
            )
            if read:
                self._git_read_at[run_id] = now
        return read
