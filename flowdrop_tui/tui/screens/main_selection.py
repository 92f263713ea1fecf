"""The main screen's selection and filter: ``MainSelection``, the ``Selection`` its
parts hold (``selection.py``).

Where the cursors are, which flow's runs are shown (a page at a time, ``m`` for the
next), the selected run the panes follow, and ``/``: the filter of the focused table.
``MainScreen`` (``main_screen.py``) is built on it and adds the layout and what
arrives. Keys are answered from where the cursors are now: a key can arrive before the
highlight messages of the cursor moves that preceded it have been handled.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from textual import on
from textual.screen import Screen
from textual.widgets import DataTable, Static

from flowdrop_tui.format import no_runs_words
from flowdrop_tui.tui.error_reports import shielded
from flowdrop_tui.tui.screens.main_keys import RUNS_SHOWN
from flowdrop_tui.tui.screens.main_parts import LazyParts, live_statuses
from flowdrop_tui.tui.widgets.filter_bar import FilterBar, filtered_title
from flowdrop_tui.tui.widgets.flow_table import FlowTable

if TYPE_CHECKING:  # the rest loads after the first frame (main_parts.py)
    from flowdrop_tui.core.mode import Mode
    from flowdrop_tui.core.records.run_record.run_info import RunInfo
    from flowdrop_tui.tui.messages import RunsRead

NO_FLOWS = "-no-flows"  # the screen's class while flows/ holds no flow (flowdrop.tcss)


class MainSelection(LazyParts, Screen[None]):
    """The selected flow and run, and the filter, of the screen built on it."""

    mode: Mode  # the workspace's, set by ``MainScreen``

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.selected_flow: str | None = None
        self.selected_run: str | None = None
        self.ready = False  # the lower panes are mounted (just after the first frame)
        self.runs_total = 0  # how many runs the selected flow has (the table shows a page)
        self.runs_shown_of: str | None = None  # the flow whose runs have been read
        self.after_runs: Callable[[], None] | None = None  # a key waiting for them

    @property
    def flows(self) -> FlowTable:
        return self.query_one(FlowTable)

    # -- the Selection its parts act on (selection.py) --------------------------------------------

    def selected_flow_name(self) -> str | None:
        return None if self.has_class(NO_FLOWS) else self.flows.selected_name

    def runs_not_shown_yet(self, retry: Callable[[], None]) -> bool:
        name = self.selected_flow_name()
        if not self.ready or (name == self.selected_flow and self.runs_shown_of == name):
            return False
        self.after_runs = retry  # the latest key wins; on_runs_read calls it
        if name != self.selected_flow:
            self._select_flow(name)  # the highlight message is still on its way
        return True

    def read_runs_again(self, retry: Callable[[], None]) -> None:
        if not self.ready or self.selected_flow is None:
            return
        self.after_runs = retry
        self.reads.read_runs(self.selected_flow, synced=True)

    def no_flow_text(self) -> str:
        if self.flows.filter_text and self.flows.rows_by_name:
            return f"no flow shows {self.flows.filter_text!r}: escape clears the filter"
        return "no flow selected"

    def lane_facts(self, key: str) -> dict[str, Any] | None:
        return self.flows.lane_facts.get(key)

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
        self.refresh_bindings()  # a lane's keys (L, d) are in the footer on a lane only
        self.reads.remember_flow(name)  # selected again when the UI next opens here
        row = self.flows.rows_by_name.get(name or "")
        self.query_one("#runs-pane").border_subtitle = ""
        self._show_titles()
        note = self.query_one("#flow-note", Static)
        error = row.get("error") if row else None
        note.update(f"cannot be loaded: {error}" if error else "")
        note.display = bool(error)
        self.runs.show_runs(name or "", [])
        self.runs_shown_of = None
        self._select_run(None)
        if name is not None:
            self.reads.read_runs(name)
        elif self.flows.filter_text and self.flows.rows_by_name:
            self.detail.show_empty(f"no flow shows {self.flows.filter_text!r}: escape clears it")
        else:
            self.detail.show_empty("no flow selected")

    @shielded
    def on_runs_read(self, message: RunsRead) -> None:
        if message.key != self.selected_flow or (message.older and self.runs.key != message.key):
            return
        self.runs.pinned = message.pinned
        runs = message.runs
        if message.older:  # the next page goes below the runs already shown
            shown_now = sorted(self.runs.runs.values(), key=lambda i: i.run, reverse=True)
            runs = [*shown_now, *(i for i in runs if i.run not in self.runs.runs)]
        self.runs.show_runs(message.key, runs)
        self.tracker.saw_live(info.run for info in message.runs if info.status in live_statuses())
        self.runs_total = message.total
        self.runs_shown_of = message.key
        self._show_more()
        self._follow_run_cursor()
        waiting, self.after_runs = self.after_runs, None
        if waiting is not None:
            waiting()
        self._refollow()

    def _show_more(self) -> None:
        """Say how many runs are shown, and that ``m`` reads the next page."""
        shown, total = len(self.runs.runs), self.runs_total
        more = f"newest {shown} of {total} · m: {min(RUNS_SHOWN, total - shown)} more"
        self.query_one("#runs-pane").border_subtitle = more if total > shown else ""

    def action_more_runs(self) -> None:
        """m: the next page of the selected flow's runs, older than the oldest shown."""
        name = self.selected_flow
        if not self.ready or name is None or self.runs.key != name:
            return
        if len(self.runs.runs) >= self.runs_total:
            self.notify(f"all {self.runs_total} runs of {name} are shown", markup=False)
            return
        self.reads.read_older_runs(name, min(self.runs.runs))

    def _follow_run_cursor(self) -> None:
        """Select the run under the cursor; with none, say why the pane is empty."""
        current = self.runs.selected_run
        self._select_run(current.run if current else None)
        if current is None and self.selected_flow is not None:
            if self.runs.runs and self.runs.filter_text:
                text = f"no run of {self.selected_flow} shows {self.runs.filter_text!r}"
                self.detail.show_empty(text + ": escape clears the filter")
            else:
                row = self.flows.rows_by_name.get(self.selected_flow) or {}
                # its own runs read and none: a last run of its key is a caller's (run.call)
                read = not self.runs.runs and self.runs_shown_of == self.selected_flow
                self.detail.show_empty(
                    no_runs_words(
                        self.selected_flow,
                        row.get("error"),
                        row.get("called_by"),
                        row.get("last_run") if read else None,
                    )
                )

    def _select_run(self, run_id: str | None) -> None:
        if run_id == self.selected_run:
            return
        self.selected_run = run_id
        self.feed.show_history(run_id, [], 0)
        self._show_titles()
        self.detail.show_run(self.runs.runs.get(run_id) if run_id else None)
        self._refollow()
        if run_id is not None:
            self.reads.poll_run(run_id, history=True)

    def _refollow(self) -> None:
        """Watch the folders of the selected run and of every run seen live."""
        self.watcher.follow(self.tracker.wanted(self.selected_run))

    # -- / ----------------------------------------------------------------------------------------

    def action_filter(self) -> None:
        """Filter the focused table; the flows when neither table has focus."""
        if not self.ready:
            return
        bar = self.query_one(FilterBar)
        if self.focused is self.runs:
            what = f"runs of {self.selected_flow}" if self.selected_flow else "runs"
            bar.open_for("runs", what, self.runs.filter_text)
        else:
            bar.open_for("flows", "flows", self.flows.filter_text)
        self.set_focus(bar)  # at once: Widget.focus() would wait for the keys already typed

    @shielded
    def on_input_changed(self, event: FilterBar.Changed) -> None:
        bar = self.query_one(FilterBar)
        if event.input is bar and bar.display:  # a late change after closing is not news
            self._apply_filter(bar.target, event.value)

    def _filter_closed(self, cleared: bool) -> None:
        """Enter (keep) or escape (clear) in the bar, applied before the next key."""
        bar = self.query_one(FilterBar)
        bar.display = False
        self._apply_filter(bar.target, "" if cleared else bar.value)
        self.set_focus(self.runs if bar.target == "runs" else self.flows)

    def _apply_filter(self, target: str, text: str) -> None:
        if target == "runs":
            self.runs.set_filter(text)
            self._follow_run_cursor()
        else:
            self.flows.set_filter(text)
            self._select_flow(self.flows.selected_name)
        self._show_titles()

    def _show_titles(self) -> None:
        flows = self.query_one("#flows-pane")
        flows.border_title = "Flows" + filtered_title(self.flows.filter_text)
        runs = self.query_one("#runs-pane")
        name = self.selected_flow
        shown = self.runs.filter_text if self.ready else ""
        runs.border_title = (f"Runs of {name}" if name else "Runs") + filtered_title(shown)
        if self.ready:  # narrow: the id is in the Run pane; a title would cut it
            run_id = self.selected_run
            wide = run_id is not None and not self.has_class("-narrow")
            self.feed.border_title = f"Events of {run_id}" if wide else "Events"
