"""The selected flow's runs, newest first."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, ClassVar

from rich.text import Text
from textual.binding import Binding, BindingType
from textual.widgets import DataTable

from flowdrop_tui.core.records.run_record.run_info import LIVE, RunInfo
from flowdrop_tui.format import duration
from flowdrop_tui.tui.labels import rounds_label, stamp
from flowdrop_tui.tui.widgets.flow_table import LIST_KEYS
from flowdrop_tui.tui.widgets.status import STATUS_CLASSES, status_text

# Fixed widths (ids have one length): what is on screen never waits for the table's
# own auto-width, which settles on a later idle.
COLUMNS = (
    ("run", "RUN", 27),
    ("status", "STATUS", 19),  # "interrupted, pinned"
    ("rounds", "ROUNDS", 11),
    ("started", "STARTED (UTC)", 19),
    ("duration", "DURATION", 8),
    ("source", "PICKED UP FROM", 27),
)
NARROW_HIDES = frozenset({"started", "source"})  # the Run pane shows both


class RunTable(DataTable[Text]):
    """One row per run of the selected flow, keyed by run id, newest on top."""

    BINDINGS: ClassVar[list[BindingType]] = [
        *LIST_KEYS,
        Binding(
            "enter",
            "screen.pick_up_run",
            "Pick up",
            id="pick-up-run",
            tooltip="Start a "
            "new run carrying this run's state (--from), or resume it if it is paused",
        ),
    ]
    COMPONENT_CLASSES: ClassVar[set[str]] = {
        *DataTable.COMPONENT_CLASSES,
        *STATUS_CLASSES,
        "run--muted",
    }

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(cursor_type="row", **kwargs)
        self.key: str | None = None
        self.runs: dict[str, RunInfo] = {}
        self.filter_text = ""
        self.narrow = False
        self.pinned: frozenset[str] = frozenset()  # runs prune never deletes

    @property
    def shown_columns(self) -> list[tuple[str, str, int]]:
        return [c for c in COLUMNS if not (self.narrow and c[0] in NARROW_HIDES)]

    def on_mount(self) -> None:
        for key, label, width in self.shown_columns:
            self.add_column(label, width=width, key=key)

    def set_narrow(self, narrow: bool) -> None:
        """Drop (or bring back) the columns the Run pane repeats, on a narrow screen."""
        if narrow == self.narrow:
            return
        self.narrow = narrow
        selected = self.selected_run
        self.clear(columns=True)
        for key, label, width in self.shown_columns:
            self.add_column(label, width=width, key=key)
        self._add_rows(sorted(self.runs.values(), key=lambda i: i.run, reverse=True))
        if selected is not None and selected.run in self.rows:
            self.move_cursor(row=self.get_row_index(selected.run), animate=False)

    @property
    def selected_run(self) -> RunInfo | None:
        if not self.row_count:
            return None
        run_id = str(self.coordinate_to_cell_key(self.cursor_coordinate).row_key.value)
        return self.runs.get(run_id)

    def _cells(self, info: RunInfo, now: datetime | None = None) -> list[Text]:
        muted = self.get_component_rich_style("run--muted", partial=True)
        cells = {
            "run": Text(info.run),
            "status": self._status(info),
            "rounds": Text(rounds_label(info)),
            "started": Text(stamp(info.started)),
            "duration": Text(duration(info.seconds(now))),
            "source": Text(info.source or "—", style=muted),
        }
        return [cells[key] for key, _, _ in self.shown_columns]

    def _status(self, info: RunInfo) -> Text:
        text = status_text(self, info.status)
        if info.waiting_now is not None:
            text.append(", waiting")
        if info.run in self.pinned:
            text.append(", pinned")
        return text

    def _matches(self, info: RunInfo) -> bool:
        """Whether the run's row, as shown, contains the filter text (any case)."""
        needle = self.filter_text
        return not needle or needle in " ".join(c.plain for c in self._cells(info)).lower()

    def show_runs(self, key: str, runs: list[RunInfo]) -> None:
        """Show ``runs`` (newest first) of ``key``, keeping the cursor on the same run."""
        selected = self.selected_run
        self.key = key
        self.runs = {info.run: info for info in runs}
        self.clear()
        self._add_rows(runs)
        if selected is not None and selected.run in self.rows:
            self.move_cursor(row=self.get_row_index(selected.run))

    def _add_rows(self, runs: list[RunInfo]) -> None:
        for info in runs:
            if self._matches(info):
                self.add_row(*self._cells(info), key=info.run)

    def upsert(self, info: RunInfo) -> bool:
        """Show one run as it now is; a new run goes on top. True when it was new."""
        new = info.run not in self.runs
        self.runs[info.run] = info
        if not self._matches(info):
            if info.run in self.rows:
                self.remove_row(info.run)  # it no longer shows the filter's text
            return new
        if info.run in self.rows:
            for (column, _, _), cell in zip(self.shown_columns, self._cells(info), strict=True):
                self.update_cell(info.run, column, cell)
            return new
        selected = self.selected_run
        self.add_row(*self._cells(info), key=info.run)
        self.sort("run", key=lambda run: run.plain, reverse=True)  # ids sort by start
        if selected is not None and selected.run in self.rows:
            self.move_cursor(row=self.get_row_index(selected.run), animate=False)
        return new

    def set_filter(self, text: str) -> None:
        self.filter_text = text.strip().lower()
        if self.key is not None:
            self.show_runs(self.key, sorted(self.runs.values(), key=lambda i: i.run, reverse=True))

    def tick(self) -> None:
        """Advance the duration of live runs (a clock, not a re-read of any file)."""
        now = datetime.now(UTC)
        for info in self.runs.values():
            if info.status in LIVE and info.run in self.rows:
                self.update_cell(info.run, "duration", Text(duration(info.seconds(now))))
