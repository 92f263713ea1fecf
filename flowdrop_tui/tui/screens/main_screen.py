"""The main screen: flows, the selected flow's runs, the selected run as it happens.

This module lays the screen out and shows what arrives; the reads are in
``workspace_reads.py`` (workers that post messages), the keys that act on runs
in ``run_actions.py``. The watch says what changed and only that is read again.
The first frame is painted from what costs nothing — discovery, the describe
cache and the index as it is on disk — and the rest (describing changed flows,
listing runs, git) fills in after it.
"""

from __future__ import annotations

from typing import ClassVar

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.widgets import DataTable, Footer, Static
from textual.worker import Worker

from flowdrop_tui.core import views
from flowdrop_tui.core.errors import FlowdropError
from flowdrop_tui.core.paths import FLOWS_DIR, Layout
from flowdrop_tui.core.records.catalog import RunCatalog
from flowdrop_tui.core.records.events import LIVE, RunInfo
from flowdrop_tui.core.records.follow import RunUpdate
from flowdrop_tui.core.watch import WorkspaceWatch
from flowdrop_tui.tui.errors import shielded
from flowdrop_tui.tui.messages import (
    FlowRowsRead,
    FlowsChanged,
    IndexChanged,
    RunActionRefused,
    RunActionTaken,
    RunChanged,
    RunDetailRead,
    RunLaunched,
    RunPolled,
    RunsRead,
    WorkspaceRead,
)
from flowdrop_tui.tui.run_tracker import RunTracker
from flowdrop_tui.tui.screens.run_actions import RunActions
from flowdrop_tui.tui.screens.workspace_reads import WorkspaceReads
from flowdrop_tui.tui.widgets.event_feed import EventFeed
from flowdrop_tui.tui.widgets.filter_bar import FilterBar
from flowdrop_tui.tui.widgets.flow_table import FlowTable
from flowdrop_tui.tui.widgets.no_flows import NoFlows
from flowdrop_tui.tui.widgets.run_detail import RunDetail
from flowdrop_tui.tui.widgets.run_table import RunTable
from flowdrop_tui.tui.widgets.workspace_bar import WorkspaceBar


class MainScreen(RunActions, WorkspaceReads):
    AUTO_FOCUS = "#flows"  # the app opens with the flow list focused on its first flow
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding(
            "slash",
            "filter",
            "Filter",
            id="filter",
            key_display="/",
            tooltip="Filter flows and runs by name, id or status",
        ),
    ]

    def __init__(self, layout: Layout, watcher: WorkspaceWatch) -> None:
        super().__init__(id="main")
        self.workspace = layout
        self.watcher = watcher
        self.catalog = RunCatalog(layout)
        self.tracker = RunTracker(layout)
        self.selected_flow: str | None = None
        self.selected_run: str | None = None
        self.arriving: str | None = None  # a run launched here: select it when it shows up
        self.ready = False  # the lower panes are mounted (just after the first frame)

    # -- layout -----------------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        # The first frame is the flow list, painted from what costs nothing: discovery,
        # the describe cache and the index — no process, no scan of runs. The panes
        # below are empty frames until just after it (see ``_after_first_paint``).
        try:
            rows = views.quick_flow_rows(self.workspace)
        except (OSError, FlowdropError):
            rows = []
        yield WorkspaceBar(self.workspace.workspace.name)
        with Vertical(id="flows-pane") as flows_pane:
            flows_pane.border_title = "Flows"
            table = FlowTable(rows, id="flows")
            table.display = bool(rows)
            yield table
            how_to = NoFlows(FLOWS_DIR)
            how_to.display = not rows
            yield how_to
        with Vertical(id="runs-pane") as runs_pane:
            runs_pane.border_title = "Runs"
            runs_pane.display = bool(rows)
        run_pane = Horizontal(id="run-pane")
        run_pane.display = bool(rows)
        yield run_pane
        yield Footer()

    @property
    def flows(self) -> FlowTable:
        return self.query_one(FlowTable)

    @property
    def runs(self) -> RunTable:
        return self.query_one(RunTable)

    @property
    def feed(self) -> EventFeed:
        return self.query_one(EventFeed)

    @property
    def detail(self) -> RunDetail:
        return self.query_one(RunDetail)

    def on_mount(self) -> None:
        # Nothing here touches the panes' children: nested containers mount theirs after
        # this screen's Mount. What needs them waits for the first frame.
        self.call_after_refresh(self._after_first_paint)

    async def _after_first_paint(self) -> None:
        """Measured (bench/ui_bench.py): mounting the lower panes with the flow list
        delays its first frame by about a fifth; mounted now, they cost it nothing."""
        feed = EventFeed(id="events")
        feed.border_title = "Events"
        detail = RunDetail(id="detail")
        detail.border_title = "Run"
        await self.query_one("#runs-pane").mount_all(
            [Static(id="flow-note", markup=False), RunTable(id="runs")]
        )
        await self.query_one("#run-pane").mount_all([feed, detail])
        await self.mount(FilterBar(), before=self.query_one(Footer))
        self.ready = True
        self._show_flows(list(self.flows.rows_by_name.values()))
        self.read_flows()
        self.read_workspace()
        self.watch_workspace()
        self.set_interval(1.0, self.runs.tick)

    # -- what RunActions acts on ------------------------------------------------------------------

    # Keys are answered from where the cursors are now: a key can arrive before the
    # highlight messages of the cursor moves that preceded it have been handled.

    def selected_flow_name(self) -> str | None:
        return self.flows.selected_name if self.flows.display else None

    def selected_run_info(self) -> RunInfo | None:
        if not self.ready:
            return None
        info = self.runs.selected_run
        return info if info is not None and info.key == self.selected_flow_name() else None

    def runs_of_selected_flow(self) -> list[RunInfo]:
        if not self.ready:
            return []
        name = self.selected_flow_name()
        runs = [info for info in self.runs.runs.values() if info.key == name]
        return sorted(runs, key=lambda info: info.run, reverse=True)

    # -- the flow list ----------------------------------------------------------------------------

    @shielded
    def on_flow_rows_read(self, message: FlowRowsRead) -> None:
        self._show_flows(message.rows)

    def _show_flows(self, rows: list[dict[str, object]]) -> None:
        has_flows = bool(rows)
        self.flows.display = has_flows
        self.query_one(NoFlows).display = not has_flows
        for pane in ("#runs-pane", "#run-pane"):  # without flows, the how-to gets the room
            self.query_one(pane).display = has_flows
        self.flows.show_rows([dict(row) for row in rows])
        self.tracker.saw_live(
            str(row["last_run"])
            for row in rows
            if row.get("status") in {str(s) for s in LIVE} and isinstance(row["last_run"], str)
        )
        self._select_flow(self.flows.selected_name)
        self._refollow()

    def on_flows_changed(self, _: FlowsChanged) -> None:
        self.read_flows()

    def on_index_changed(self, _: IndexChanged) -> None:
        self.read_flows()

    @shielded
    def on_workspace_read(self, message: WorkspaceRead) -> None:
        self.query_one(WorkspaceBar).show_git(message.git)

    # -- selection --------------------------------------------------------------------------------

    # A highlight message may arrive after the table was rebuilt and its cursor moved
    # again: follow where the cursor is now, not where the message says it was.
    @on(DataTable.RowHighlighted, "#flows")
    @shielded
    def _flow_highlighted(self, _: DataTable.RowHighlighted) -> None:
        if self.ready:
            self._select_flow(self.flows.selected_name)

    @on(DataTable.RowHighlighted, "#runs")
    @shielded
    def _run_highlighted(self, _: DataTable.RowHighlighted) -> None:
        current = self.runs.selected_run
        self._select_run(current.run if current else None)

    def _select_flow(self, name: str | None) -> None:
        if name == self.selected_flow:
            return
        self.selected_flow = name
        row = self.flows.rows_by_name.get(name or "")
        pane = self.query_one("#runs-pane")
        pane.border_title = f"Runs of {name}" if name else "Runs"
        pane.border_subtitle = ""
        note = self.query_one("#flow-note", Static)
        error = row.get("error") if row else None
        note.update(f"cannot be loaded: {error}" if error else "")
        note.display = bool(error)
        self.runs.show_runs(name or "", [])
        self._select_run(None)
        if name is not None:
            self.read_runs(name)
        else:
            self.detail.show_empty("no flow selected")

    @shielded
    def on_runs_read(self, message: RunsRead) -> None:
        if message.key != self.selected_flow:
            return
        self.runs.show_runs(message.key, message.runs)
        self.tracker.saw_live(info.run for info in message.runs if info.status in LIVE)
        shown = len(message.runs)
        pane = self.query_one("#runs-pane")
        pane.border_subtitle = f"newest {shown} of {message.total}" if message.total > shown else ""
        current = self.runs.selected_run
        self._select_run(current.run if current else None)
        if current is None:
            self.detail.show_empty(f"no runs of {message.key} yet — enter runs it")
        self._refollow()

    def _select_run(self, run_id: str | None) -> None:
        if run_id == self.selected_run:
            return
        self.selected_run = run_id
        self.feed.show_history(run_id, [], 0)
        self.feed.border_title = f"Events of {run_id}" if run_id else "Events"
        self.detail.show_run(self.runs.runs.get(run_id) if run_id else None)
        self._refollow()
        if run_id is not None:
            self.poll_run(run_id, history=True)

    # -- following runs ---------------------------------------------------------------------------

    def _refollow(self) -> None:
        """Watch the folders of the selected run and of every run seen live."""
        self.watcher.follow(self.tracker.wanted(self.selected_run))

    def on_run_changed(self, message: RunChanged) -> None:
        self.poll_run(message.run_id)

    @shielded
    def on_run_polled(self, message: RunPolled) -> None:
        update = message.update
        info = update.info
        self.flows.apply_run(info)
        if not self.ready:
            return  # the runs pane is read in full once it is mounted
        if info.key is not None and info.key == self.selected_flow:
            new = self.runs.upsert(info)
            if new and self.arriving == info.run:
                self.arriving = None
                self.runs.move_cursor(row=self.runs.get_row_index(info.run))
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
        extra = {"state": message.state, "sessions": message.sessions, "git": message.git}
        self.detail.show_extra(message.run_id, extra)

    def _track(self, update: RunUpdate) -> None:
        """Tell the user when a run they watched ends or pauses, with the reason."""
        refollow, notice = self.tracker.seen(update.info)
        if notice is not None:
            text, severity = notice
            self.notify(text, severity=severity, markup=False, timeout=8)  # type: ignore[arg-type]
        if refollow:
            self._refollow()

    # -- what the actions answered ----------------------------------------------------------------

    @shielded
    def on_run_launched(self, message: RunLaunched) -> None:
        self.tracker.saw_live([message.run_id])
        self.arriving = message.run_id
        self.notify(f"run {message.run_id} of {message.key}: {message.what}", markup=False)
        self._refollow()
        self.poll_run(message.run_id)

    def on_run_action_taken(self, message: RunActionTaken) -> None:
        self.notify(message.text, markup=False)

    def on_run_action_refused(self, message: RunActionRefused) -> None:
        self.notify(
            message.text,
            title=f"refused ({message.code})",
            severity="warning",
            markup=False,
            timeout=10,
        )

    # -- / ----------------------------------------------------------------------------------------

    def action_filter(self) -> None:
        if not self.ready:
            return
        bar = self.query_one(FilterBar)
        bar.display = True
        bar.focus()

    @shielded
    def on_input_changed(self, event: FilterBar.Changed) -> None:
        self.flows.set_filter(event.value)
        self.runs.set_filter(event.value)
        self._select_flow(self.flows.selected_name)

    def on_filter_bar_closed(self, event: FilterBar.Closed) -> None:
        bar = self.query_one(FilterBar)
        bar.display = False
        value = bar.value.strip()
        self.query_one("#flows-pane").border_title = (
            f"Flows · filter: {value}" if value else "Flows"
        )
        self.flows.focus()

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        report = getattr(self.app, "report_worker", None)
        if report is not None:
            report(event)
