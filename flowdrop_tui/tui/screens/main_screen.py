"""The main screen: flows, the selected flow's runs, the selected run as it happens.

This module lays the screen out and shows what arrives; it is built on its selection
and filter (``MainSelection``, ``main_selection.py``), which its parts hold through the
``Selection`` protocol (``selection.py``): the reads (``workspace_reads.py``, workers
that post messages), the keys that act on runs (``launch_actions.py``,
``stop_actions.py``) and those that open or copy things (``open_files.py``), made and
handed their keys by ``LazyParts`` (``main_parts.py``). The watch says what changed
and only that is read again. The first frame is painted from what costs nothing —
discovery, the describe cache, the index as it is on disk — and the rest (describing,
listing runs, git) fills in after it. Without flows the screen has the class
``-no-flows``: the how-to in place of the panes (``flowdrop.tcss``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.css.query import NoMatches
from textual.widget import MountError
from textual.widgets import Footer, Static
from textual.worker import Worker

from flowdrop_tui.core import gc_pause
from flowdrop_tui.core.errors import FlowdropError
from flowdrop_tui.core.flow_list import quick_flow_rows
from flowdrop_tui.core.paths import FLOWS_DIR
from flowdrop_tui.core.ui_memory import remembered_flow
from flowdrop_tui.format import waiting_words
from flowdrop_tui.tui.error_reports import report_worker, shielded
from flowdrop_tui.tui.screens.main_keys import FILE_KEYS, LANE_KEYS, RUN_KEYS
from flowdrop_tui.tui.screens.main_parts import live_statuses, lower_panes
from flowdrop_tui.tui.screens.main_selection import NO_FLOWS, MainSelection
from flowdrop_tui.tui.widgets.filter_bar import FilterBar
from flowdrop_tui.tui.widgets.flow_table import FlowTable
from flowdrop_tui.tui.widgets.no_flows import NoFlows
from flowdrop_tui.tui.widgets.workspace_bar import WorkspaceBar, queued_names

if TYPE_CHECKING:  # the rest loads after the first frame (main_parts.py)
    from flowdrop_tui.core.mode import Mode
    from flowdrop_tui.core.records.run_record.follow import RunUpdate
    from flowdrop_tui.tui.messages import (
        FlowRowsRead,
        FlowsChanged,
        IndexChanged,
        LanesRead,
        RunActionRefused,
        RunActionTaken,
        RunChanged,
        RunDetailRead,
        RunLaunched,
        RunPolled,
        UsageRead,
        WorkspaceRead,
    )

NARROW = 100  # columns: below it, tables drop what the Run pane repeats, the footer packs
GIT_EVERY = 10.0  # seconds between reads of the workspace's git state for the header
SHORT = 30  # rows: below it, the flows pane is only as tall as its rows (up to six)


def _size_classes(width: int, height: int) -> str:
    """The screen's classes for a terminal of this size (``MainScreen._fit``)."""
    return " ".join(
        name for name, on in (("-narrow", width < NARROW), ("-short", height < SHORT)) if on
    )


class MainScreen(MainSelection):
    AUTO_FOCUS = "#flows"  # the app opens with the flow list focused on its first flow
    BINDINGS: ClassVar[list[BindingType]] = [
        *FILE_KEYS,
        *RUN_KEYS,
        *LANE_KEYS,  # before d: a lane's d is in the footer, a flow's only in help
        Binding(
            "slash",
            "filter",
            "Filter",
            id="filter",
            key_display="/",
            tooltip="Filter the focused table (flows or runs) by the text its rows show",
        ),
        Binding(
            "d",
            "show_diff",
            "Diff",
            id="diff",
            tooltip="What the selected run's last round changed (its commits, what it left); "
            "[ ] step through its rounds",
            show=False,  # not in the footer, which it would push past 80 columns: help lists it
        ),
        Binding("m", "more_runs", "More runs", show=False),  # help's words say it
    ]

    def __init__(self, mode: Mode) -> None:
        # Made for the terminal's size (``_fit``'s classes set now): a class changed once
        # mounted restyles every widget again before the first frame.
        width, height = self.app.size
        super().__init__(id="main", classes=_size_classes(width, height))
        layout = mode.layout
        self.workspace = layout
        self.mode = mode  # chosen once, at the app's start: every run action asks it
        self.store = mode.store_label  # where the records come from (the top line)
        self.arriving: str | None = None  # a run launched here: select it when it shows up
        self.waiting: dict[str, str] = {}  # flow → how its live run waits (SPEC §19)
        # the selection's state is MainSelection's; watcher, tracker, reads, the actions,
        # open_files: made on first use (LazyParts)

    # -- layout -----------------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        # The first frame is the flow list, painted from what costs nothing: discovery,
        # the describe cache and the index — no process, no scan of runs. The panes
        # below are empty frames until just after it (see ``_after_first_paint``).
        try:
            rows = quick_flow_rows(self.workspace)
        except (OSError, FlowdropError):
            rows = []
        last = remembered_flow(self.workspace)  # the flow selected when the UI was last open
        self.set_class(not rows, NO_FLOWS)  # the how-to instead of the panes (flowdrop.tcss)
        yield WorkspaceBar(self.workspace.workspace.name, self.store)
        with Vertical(id="flows-pane") as flows_pane:
            flows_pane.border_title = "Flows"
            width = self.app.size.width  # fitted as _fit does
            yield FlowTable(rows, id="flows", fit=(width < NARROW, width - 4), selected=last)
            yield NoFlows(FLOWS_DIR)
        with Vertical(id="runs-pane") as runs_pane:
            runs_pane.border_title = "Runs"
        yield Horizontal(id="run-pane")
        narrow = self.has_class("-narrow")
        yield Footer(compact=narrow, show_command_palette=not narrow)  # as _fit sets them

    def on_mount(self) -> None:
        # Nothing here touches the panes' children: nested containers mount theirs after
        # this screen's Mount. What needs them waits for the first frame.
        self._fit()
        self.call_after_refresh(self._after_first_paint)

    def on_resize(self) -> None:
        self._fit()

    def _fit(self) -> None:
        """80×24 is a first-class size: classes for the stylesheet, columns for the tables."""
        width, height = self.app.size
        narrow = width < NARROW
        self.set_class(narrow, "-narrow")
        self.set_class(height < SHORT, "-short")  # both as _size_classes says
        footer = self.query_one(Footer)
        footer.compact = narrow
        footer.show_command_palette = not narrow  # ctrl+p still opens it; help says so
        self.flows.set_fit(narrow, width - 4)  # the pane's border and the scrollbar
        self.refresh_bindings()  # a lane's footer keys depend on the width (main_keys.py)
        if self.ready:
            self.runs.set_narrow(narrow)
            self._show_titles()

    async def _after_first_paint(self) -> None:
        """Measured (bench/ui_bench.py): mounting the lower panes with the flow list
        delays its first frame by about a fifth; mounted now, they cost it nothing."""
        EventFeed, RunDetail, RunTable = lower_panes()  # imported now, after the frame
        feed = EventFeed(id="events")
        feed.border_title = "Events"
        detail = RunDetail(id="detail")
        detail.border_title = "Run"
        try:
            await self.query_one("#runs-pane").mount_all(
                [Static(id="flow-note", markup=False), RunTable(id="runs")]
            )
            await self.query_one("#run-pane").mount_all([feed, detail])
            await self.mount(FilterBar(self._filter_closed), before=self.query_one(Footer))
        except (MountError, NoMatches):
            if self.is_attached:
                raise
            return  # `q` before the first frame settled: the screen is already gone
        finally:  # paused by cli.main (core/gc_pause.py); the first frame is out by now
            gc_pause.resume()
        if not self.is_attached:
            return
        self.ready = True
        self._fit()
        self._show_flows(list(self.flows.rows_by_name.values()))
        self.reads.read_flows()
        self.reads.read_workspace()
        self.reads.read_usage()
        self.reads.watch_workspace()
        self.set_interval(1.0, self.runs.tick)
        # The header's git state, kept live: a commit or an edit made outside shows
        # within this many seconds (each read is a short child process).
        self.set_interval(GIT_EVERY, self.reads.read_workspace)

    # -- the flow list ----------------------------------------------------------------------------

    @shielded
    def on_flow_rows_read(self, message: FlowRowsRead) -> None:
        self._show_flows(message.rows)
        if any(row.get("lane") for row in message.rows):
            self.reads.read_lanes()

    def _show_flows(self, rows: list[dict[str, object]]) -> None:
        self.set_class(not rows, NO_FLOWS)  # without flows, the how-to gets the room
        self.flows.show_rows([dict(row) for row in rows])
        self.reads.flows_shown(rows, self.runs.runs if self.ready else {})
        self._select_flow(self.flows.selected_name)
        self._refollow()
        self._show_summary()

    def _show_summary(self) -> None:
        """The header: what runs, what is paused, also on reopening (run.call's: the caller)."""
        rows = {n: r for n, r in self.flows.rows_by_name.items() if not r.get("called_by")}
        live = {str(s) for s in live_statuses()}
        running = [
            f"{name} ({self.waiting[name]})" if name in self.waiting else name
            for name, row in rows.items()
            if row.get("status") in live
        ]
        paused = [name for name, row in rows.items() if row.get("status") == "paused"]
        self.query_one(WorkspaceBar).show_summary(running, paused, queued_names(rows))

    @shielded
    def on_lanes_read(self, message: LanesRead) -> None:
        self.flows.show_lane_facts(message.facts)

    def on_flows_changed(self, _: FlowsChanged) -> None:
        self.reads.read_flows()

    def on_index_changed(self, _: IndexChanged) -> None:
        self.reads.read_flows()
        self.reads.read_usage()

    @shielded
    def on_workspace_read(self, message: WorkspaceRead) -> None:
        self.query_one(WorkspaceBar).show_git(message.git)

    @shielded
    def on_usage_read(self, message: UsageRead) -> None:
        self.query_one(WorkspaceBar).show_usage(message.runs, message.used)

    # -- following runs ---------------------------------------------------------------------------

    def on_run_changed(self, message: RunChanged) -> None:
        if not (self.workspace.runs / message.run_id).is_dir():
            self._run_vanished()  # pruned (or deleted by hand): nothing to poll
            return
        self.reads.poll_run(message.run_id)

    def _run_vanished(self) -> None:
        """Runs were deleted: list the flow's runs and measure the workspace again."""
        if self.selected_flow is not None:
            self.reads.read_runs(self.selected_flow)
        self.reads.read_usage()

    @shielded
    def on_run_polled(self, message: RunPolled) -> None:
        update = message.update
        info = update.info
        self.flows.apply_run(info)
        if info.key is not None:
            words = waiting_words(info.waiting_now)
            if words:
                self.waiting[info.key] = words
            else:
                self.waiting.pop(info.key, None)
        self._show_summary()
        if not self.ready:
            return  # the runs pane is read in full once it is mounted
        if info.key is not None and info.key == self.selected_flow:
            self.runs.upsert(info)
            if self.arriving == info.run:
                self._show_arrived(info.run)
            self._follow_run_cursor()  # a filter may have hidden the row under it
        if info.run == self.selected_run:
            if message.history or update.restarted:
                self.feed.show_history(info.run, update.events, update.dropped)
            else:
                self.feed.append(update.events)
            self.detail.show_run(info)
            fresh = message.history or update.output_restarted
            self.detail.show_output(info.run, update.output, fresh=fresh, error=update.output_error)
        self._track(update)

    @shielded
    def on_run_detail_read(self, message: RunDetailRead) -> None:
        self.tracker.git[message.run_id] = message.git
        extra: dict[str, Any] = {"state": message.state, "sessions": message.sessions}
        extra |= {"git": message.git, "worker": message.worker}
        self.detail.show_extra(message.run_id, extra)

    def _show_arrived(self, run_id: str) -> None:
        """Put the cursor on a run launched here, even when the runs filter hid it."""
        if run_id not in self.runs.rows and self.runs.filter_text:
            self.notify(
                f"the runs filter {self.runs.filter_text!r} hid the new run: cleared",
                markup=False,
            )
            self._apply_filter("runs", "")
        if run_id in self.runs.rows:
            self.arriving = None
            self.runs.move_cursor(row=self.runs.get_row_index(run_id), animate=False)

    def _track(self, update: RunUpdate) -> None:
        """Tell the user when a run they watched ends or pauses, with the reason."""
        refollow, notice = self.tracker.seen(update.info)
        if notice is not None:
            self.reads.read_workspace()  # a run that ended or paused may have committed
            text, severity = notice
            self.notify(text, severity=severity, markup=False, timeout=6)  # type: ignore[arg-type]
        if refollow:
            self._refollow()

    # -- what the actions answered ----------------------------------------------------------------

    @shielded
    def on_run_launched(self, message: RunLaunched) -> None:
        self.tracker.saw_live([message.run_id])
        self.arriving = message.run_id
        self.notify(f"run {message.run_id} of {message.key}: {message.what}", markup=False)
        self._refollow()
        if (self.workspace.runs / message.run_id).is_dir():
            self.reads.poll_run(message.run_id)
        # else (remote mode) it reaches this replica in a moment: its folder's appearing
        # is a RunChanged, and the watch takes the followed folder in then.

    def on_run_action_taken(self, message: RunActionTaken) -> None:
        self.notify(message.text, markup=False)

    def on_run_action_refused(self, message: RunActionRefused) -> None:
        self.notify(
            message.text,
            title=f"refused ({message.code})",
            severity="warning",
            markup=False,
            timeout=7,
        )

    # -- escape -----------------------------------------------------------------------------------

    def action_stop_run(self) -> None:
        """Escape backs out first: a kept filter is cleared, and that is all it does."""
        if not self.ready:
            return
        kept = [t for t, table in (("flows", self.flows), ("runs", self.runs)) if table.filter_text]
        if kept:
            for target in kept:
                self._apply_filter(target, "")
            return
        self.stop_actions.stop_run(again=self.action_stop_run)

    @on(Worker.StateChanged)
    def _worker_failed(self, event: Worker.StateChanged) -> None:
        """The parts' workers run on this screen: a failure is reported, never fatal."""
        report_worker(self.app, event)
