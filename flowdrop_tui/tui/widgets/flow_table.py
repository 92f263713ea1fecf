"""The flow list: each flow with its last run's status, round counter and resumability."""

from __future__ import annotations

from typing import Any, ClassVar

from rich.text import Text
from textual.binding import Binding, BindingType
from textual.widgets import DataTable

from ...format import round_label
from ..labels import short_error
from .status import STATUS_CLASSES, status_text

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

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(cursor_type="row", zebra_stripes=False, **kwargs)
        self.rows_by_name: dict[str, dict[str, Any]] = {}
        self.filter_text = ""
        self._theme: str | None = None

    def on_mount(self) -> None:
        for key, label in COLUMNS:
            self.add_column(label, key=key)

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
        if name in self.rows:
            for (column, _), cell in zip(COLUMNS, self._cells(row), strict=True):
                self.update_cell(name, column, cell, update_width=True)

    def set_filter(self, text: str) -> None:
        self.filter_text = text.strip().lower()
        self._redraw()

    def _visible(self) -> list[dict[str, Any]]:
        needle = self.filter_text
        return [row for name, row in self.rows_by_name.items() if needle in name.lower()]

    def _redraw(self) -> None:
        visible = self._visible()
        names = [str(row["name"]) for row in visible]
        current = [str(row.key.value) for row in self.ordered_rows]
        if names == current:
            for row in visible:
                for (column, _), cell in zip(COLUMNS, self._cells(row), strict=True):
                    self.update_cell(str(row["name"]), column, cell, update_width=True)
            return
        selected = self.selected_name
        self.clear()
        for row in visible:
            self.add_row(*self._cells(row), key=str(row["name"]))
        if selected in names:
            self.move_cursor(row=names.index(selected))

    def notify_style_update(self) -> None:
        super().notify_style_update()
        theme = self.app.theme if self.is_attached else None
        if theme != self._theme and self.rows_by_name:
            self._theme = theme
            self._redraw()  # a theme change recolours the statuses
