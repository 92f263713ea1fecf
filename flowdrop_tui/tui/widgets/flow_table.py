"""The flow list: each flow with its last run's status, round counter and resumability."""

from __future__ import annotations

from typing import Any, ClassVar

from rich.text import Text
from textual.binding import Binding, BindingType
from textual.widgets import DataTable

from flowdrop_tui.core.records.events import RunInfo
from flowdrop_tui.format import round_label
from flowdrop_tui.tui.labels import short_error
from flowdrop_tui.tui.widgets.status import STATUS_CLASSES, status_text

MAX_WIDTH = 80  # a long description or error is cut here; the runs pane shows it whole
COLUMNS = (
    ("flow", "FLOW"),
    ("status", "STATUS"),
    ("round", "ROUND"),
    ("resumable", "RESUMABLE"),
    ("last_run", "LAST RUN"),
    ("about", "ABOUT"),
)


class FlowTable(DataTable[Text]):
    """One row per flow under ``flows/``, keyed by its name."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding(
            "enter",
            "screen.run_flow",
            "Run",
            id="run-flow",
            tooltip="Run the flow; picks up its last state when it declares resumable=True",
        ),
    ]
    COMPONENT_CLASSES: ClassVar[set[str]] = {
        *DataTable.COMPONENT_CLASSES,
        *STATUS_CLASSES,
        "flow--muted",
        "flow--error",
    }

    def __init__(self, rows: list[dict[str, Any]], **kwargs: Any) -> None:
        super().__init__(cursor_type="row", zebra_stripes=False, **kwargs)
        self.rows_by_name: dict[str, dict[str, Any]] = {str(row["name"]): row for row in rows}
        self.filter_text = ""
        self._theme: str | None = None
        self._widths: list[int] = []

    def on_mount(self) -> None:
        self._redraw()  # the rows it was made with are in the first frame

    @property
    def selected_name(self) -> str | None:
        if not self.row_count:
            return None
        return str(self.coordinate_to_cell_key(self.cursor_coordinate).row_key.value)

    def _cells(self, row: dict[str, Any]) -> list[Text]:
        muted = self.get_component_rich_style("flow--muted", partial=True)
        error_style = self.get_component_rich_style("flow--error", partial=True)
        error = row.get("error")
        if error:
            resumable = Text(short_error(str(error)), style=error_style)
            about = Text(str(error).splitlines()[0], style=error_style)
        elif row.get("described") is False:
            resumable = Text("…", style=muted)
            about = Text("reading the flow…", style=muted)
        else:
            resumable = Text("yes" if row.get("resumable") else "no")
            about = Text(str(row.get("description") or ""), style=muted)
        return [
            Text(str(row["name"])),
            status_text(self, row.get("status")),
            Text(round_label(int(row.get("round") or 0))),
            resumable,
            Text(str(row.get("last_run") or "—"), style=muted),
            about,
        ]

    def show_rows(self, rows: list[dict[str, Any]]) -> None:
        """Show ``rows`` (filtered); cells change in place when the flows are the same."""
        self.rows_by_name = {str(row["name"]): row for row in rows}
        self._redraw()

    def update_row(self, name: str, **changes: Any) -> None:
        row = self.rows_by_name.get(name)
        if row is None:
            return
        row.update(changes)
        if name not in self.rows:
            return  # filtered out
        cells = self._cells(row)
        if any(cell.cell_len > width for cell, width in zip(cells, self._widths, strict=True)):
            self._redraw()  # a column must widen
            return
        for (column, _), cell in zip(COLUMNS, cells, strict=True):
            self.update_cell(name, column, cell)  # one row, as a live run moves on

    def apply_run(self, info: RunInfo) -> None:
        """A run moved on: update the rows of the flows it is the last run of (its own
        key, and the keys it called), without re-reading the index."""
        for key, round_ in info.key_rounds.items():
            row = self.rows_by_name.get(key)
            if row is None:
                continue
            last = row.get("last_run")
            newer = key == info.key and (not isinstance(last, str) or info.run > last)
            if newer or last == info.run:
                self.update_row(key, last_run=info.run, status=str(info.status), round=round_)

    def set_filter(self, text: str) -> None:
        self.filter_text = text.strip().lower()
        self._redraw()

    def _visible(self) -> list[dict[str, Any]]:
        needle = self.filter_text
        return [row for name, row in self.rows_by_name.items() if needle in name.lower()]

    def _redraw(self) -> None:
        """Show the visible rows, in place when only their cells changed.

        Column widths are worked out here from the cells and set explicitly: the
        table's own auto-width settles on a later idle, which would make what is on
        screen depend on timing."""
        cells = {str(row["name"]): self._cells(row) for row in self._visible()}
        widths = [
            min(MAX_WIDTH, max([len(label), *(row[n].cell_len for row in cells.values())]))
            for n, (_, label) in enumerate(COLUMNS)
        ]
        current = [str(row.key.value) for row in self.ordered_rows]
        if list(cells) == current and widths == self._widths:
            for name, row_cells in cells.items():
                for (column, _), cell in zip(COLUMNS, row_cells, strict=True):
                    self.update_cell(name, column, cell)
            return
        selected = self.selected_name
        self.clear(columns=True)
        self._widths = widths
        for (key, label), width in zip(COLUMNS, widths, strict=True):
            self.add_column(label, width=width, key=key)
        for name, row_cells in cells.items():
            self.add_row(*row_cells, key=name)
        if selected in cells:
            self.move_cursor(row=list(cells).index(selected))

    def notify_style_update(self) -> None:
        super().notify_style_update()
        theme = self.app.theme if self.is_attached else None
        if theme != self._theme and self.columns:
            self._theme = theme
            self._redraw()  # a theme change recolours the statuses
