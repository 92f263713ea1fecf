"""The main screen's reads: every one a worker that calls the core and posts a message.

Thread workers for what blocks (records, child processes); one async worker for
the watch. None touches a widget: what they read arrives as a message, which
the screen shows (STYLE habits 2 and 3).
"""

from __future__ import annotations

import contextlib
import threading
from typing import Any

from textual.worker import get_current_worker

from flowdrop_tui.core import ui_memory, views, watch
from flowdrop_tui.core.errors import FlowdropError
from flowdrop_tui.core.flows.discovery import FlowInfo, describe, describe_cached
from flowdrop_tui.core.git import isolated
from flowdrop_tui.core.paths import Layout
from flowdrop_tui.core.records.listing import pins, queued_starts
from flowdrop_tui.core.records.listing.catalog import RunCatalog
from flowdrop_tui.core.records.listing.ledger import isolated_usage
from flowdrop_tui.core.records.run_record.run_info import LIVE, RunInfo
from flowdrop_tui.core.records.run_record.worker_mark import worker_of
from flowdrop_tui.core.watch import WorkspaceWatch
from flowdrop_tui.tui.messages import (
    FlowRowsRead,
    FlowsChanged,
    IndexChanged,
    LanesRead,
    RunChanged,
    RunDetailRead,
    RunPolled,
    RunsRead,
    UsageRead,
    WorkspaceRead,
)
from flowdrop_tui.tui.screens.lane_rows import grouped, lane_facts
from flowdrop_tui.tui.screens.main_keys import RUNS_SHOWN
from flowdrop_tui.tui.screens.selection import SelectionScreen, work_on_screen


class WorkspaceReads:
    """The reads, run as workers on the screen; the selected run from the screen."""

    def __init__(self, screen: SelectionScreen, watcher: WorkspaceWatch) -> None:
        self.screen = screen
        self.workspace: Layout = screen.workspace
        self.watcher = watcher
        self.catalog = RunCatalog(screen.workspace)
        self.tracker = screen.tracker
        # The header's git read: one at a time, never cancelled by the next — on a loaded
        # machine or a big repository a read may take longer than the interval between
        # them, and cancelling it for a newer one showed no branch at all. A read asked
        # while one is in flight runs once more after it (``_workspace_again``).
        self._workspace_lock = threading.Lock()
        self._workspace_busy = False
        self._workspace_again = False

    @work_on_screen(exclusive=True, group="watch")
    async def watch_workspace(self) -> None:
        """The one watch: each domain event becomes a message that coalesces with its like."""
        async for batch in self.watcher.events():
            for event in batch:
                if isinstance(event, watch.RunChanged):
                    self.screen.post_message(RunChanged(event.run_id))
                elif isinstance(event, watch.FlowsChanged):
                    self.screen.post_message(FlowsChanged())
                else:
                    self.screen.post_message(IndexChanged())

    @work_on_screen(thread=True, exclusive=True, group="flows")
    def read_flows(self) -> None:
        """Declarations from the cache first, then describe what changed (child processes)."""
        refs = views.thread_refs(self.workspace)  # the flows, and the threads run by path
        cached = describe_cached(self.workspace, refs)
        known = [
            info or FlowInfo(ref.key, ref.rel(self.workspace), None, "", None)
            for ref, info in zip(refs, cached, strict=True)
        ]
        missing = [ref for ref, info in zip(refs, cached, strict=True) if info is None]
        waiting = {ref.key for ref in missing}
        rows = views.flow_rows(self.workspace, known)
        for row in rows:  # LangGraph threads (SPEC §22) and lanes: nothing to describe
            row["described"] = row["name"] not in waiting
        rows = grouped(rows)
        self.screen.post_message(FlowRowsRead(_queued(self.workspace, rows), described=not missing))
        if missing and not get_current_worker().is_cancelled:
            infos = describe(self.workspace, refs)
            rows = grouped(views.flow_rows(self.workspace, infos))
            self.screen.post_message(FlowRowsRead(_queued(self.workspace, rows), described=True))

    @work_on_screen(thread=True, exclusive=True, group="lanes")
    def read_lanes(self) -> None:
        """Each lane's git facts for its row (``lanes --json``), once its rows are shown:
        git runs for each lane, so never before the first frame."""
        self.screen.post_message(LanesRead(lane_facts(self.workspace)))

    def flows_shown(self, rows: list[dict[str, Any]], shown: dict[str, RunInfo]) -> None:
        """The flow list is on screen: follow each last run it shows live, and poll every
        run the Runs pane shows whose status the flow list now says otherwise. A run's
        status change always rewrites its index entry, while its own files are watched
        only when it is selected or seen live: a paused run closed elsewhere (or by a
        worker, in remote mode) is not, and its row kept `paused` until a key was pressed."""
        live = {str(status) for status in LIVE}
        self.tracker.saw_live(
            str(row["last_run"])
            for row in rows
            if row.get("status") in live and isinstance(row["last_run"], str)
        )
        for row in rows:
            last, status = row.get("last_run"), row.get("status")
            info = shown.get(last) if isinstance(last, str) else None
            if info is not None and status is not None and str(info.status) != status:
                self.poll_run(info.run)

    def read_workspace(self) -> None:
        """Read git's facts for the header: now, or after the read in flight."""
        with self._workspace_lock:
            if self._workspace_busy:
                self._workspace_again = True
                return
            self._workspace_busy = True
        try:
            self._read_workspace()
        except BaseException:  # no worker started: the next read must not wait on it
            with self._workspace_lock:
                self._workspace_busy = False
            raise

    @work_on_screen(thread=True, group="workspace")
    def _read_workspace(self) -> None:
        try:
            while True:
                found = isolated(self.workspace.workspace, "facts", cancelled=_cancelled)
                self.screen.post_message(WorkspaceRead(found))
                with self._workspace_lock:
                    if not self._workspace_again or _cancelled():
                        self._workspace_busy = False
                        return
                    self._workspace_again = False
        except BaseException:
            with self._workspace_lock:  # a failed read never stops the next ones
                self._workspace_busy = False
            raise

    @work_on_screen(thread=True, exclusive=True, group="remember-flow")
    def remember_flow(self, name: str | None) -> None:
        """The flow selected again when the UI next opens here (``core/ui_memory.py``)."""
        if name is not None:
            ui_memory.remember_flow(self.workspace, name)

    @work_on_screen(thread=True, exclusive=True, group="usage")
    def read_usage(self) -> None:
        """Runs and disk used (in a child process: a cold ledger reads every run once)."""
        used = isolated_usage(self.workspace, cancelled=_cancelled)
        if used is not None:
            self.screen.post_message(UsageRead(used.runs, used.bytes))

    @work_on_screen(thread=True, exclusive=True, group="runs")
    def read_runs(self, key: str, synced: bool = False) -> None:
        """The newest page of ``key``'s runs (``synced``: the records brought up to date
        first; unreachable, the page is read as it is here)."""
        if synced:
            with contextlib.suppress(FlowdropError):
                self.screen.mode.sync()
        runs = self.catalog.runs_of(key, RUNS_SHOWN)
        pinned = frozenset(pins.pinned(self.workspace))
        self.screen.post_message(RunsRead(key, runs, self.catalog.count(key), pinned=pinned))

    @work_on_screen(thread=True, group="older-runs")
    def read_older_runs(self, key: str, before: str) -> None:
        """The next page: ``key``'s runs older than ``before`` (the oldest shown)."""
        runs = self.catalog.runs_of(key, RUNS_SHOWN, before=before)
        pinned = frozenset(pins.pinned(self.workspace))
        self.screen.post_message(
            RunsRead(key, runs, self.catalog.count(key), older=True, pinned=pinned)
        )

    @work_on_screen(thread=True, group="poll")
    def poll_run(self, run_id: str, history: bool = False) -> None:
        """Read what the run appended; post it in order (the follower's lock is held).
        What it printed matters only on the selected run's pane, and never re-reads its state."""
        follower = self.tracker.follower(run_id)
        with follower.lock:
            update = follower.poll(history=history)
            changed = update.events or update.restarted or update.previous != update.info.status
            printed = run_id == self.screen.selected_run and bool(
                update.output or update.output_error
            )
            if history or changed or printed:
                self.screen.post_message(RunPolled(update, history=history))
        if run_id == self.screen.selected_run and (history or changed):
            self.read_detail(update.info, self.tracker.git_due(run_id, update.events, history))

    def read_detail(self, info: RunInfo, with_git: bool) -> None:
        """State, sessions and (when it may have moved) git: after the events are on screen."""
        state = views.state_view(self.workspace, info)
        sessions = views.sessions_of(info)
        if with_git:
            git = views.git_of(self.workspace, info, isolated=True)  # no gitpython in here
        else:
            git = self.tracker.git.get(info.run)
        worker = worker_of(self.workspace.run_dir(info.run))  # remote mode's; else None
        self.screen.post_message(RunDetailRead(info.run, state, sessions, git, worker))


def _cancelled() -> bool:
    """The worker this runs on was cancelled (the screen closing, the app quitting)."""
    return get_current_worker().is_cancelled


def _queued(layout: Layout, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Mark the flows a start waits for a worker for (remote mode): their row and the
    top line say so until a worker takes it or it is withdrawn."""
    waiting = {start.key for start in queued_starts.read(layout)}
    for row in rows:
        row["queued"] = row["name"] in waiting
    return rows
