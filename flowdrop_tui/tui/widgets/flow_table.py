"""The flow list: each flow with its last run's status, round counter and resumability."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from rich.text import Text
from textual.binding import Binding, BindingType
from textual.widgets import DataTable

from flowdrop_tui.format import round_label, usage_short
from flowdrop_tui.tui.labels import lane_words, short_error
from flowdrop_tui.tui.textual_compat import scroll_cursor_into_view
from flowdrop_tui.tui.widgets.status import STATUS_CLASSES, queued, queued_text, status_text

if TYPE_CHECKING:  # the records' classes load after the first frame (bench/README.md, (a))
    from flowdrop_tui.core.records.run_record.run_info import RunInfo

MAX_WIDTH = 80  # a long description or error is cut here; the runs pane shows it whole
COLUMNS = (
    ("flow", "FLOW"),
    ("status", "STATUS"),
    ("round", "ROUND"),
    ("resumable", "RESUMABLE"),
    ("last_run", "LAST RUN"),
    ("about", "ABOUT"),
)
USAGE_COLUMN = ("usage", "USAGE")  # before ABOUT, only while some flow has usage
NARROW_HIDES = frozenset({"last_run", "usage"})  # the runs and run panes show them


# Keys a lazygit / k9s user reaches for, in every list (not in the footer: help lists them).
LIST_KEYS: list[BindingType] = [
    Binding("j", "cursor_down", "Down", show=False),
    Binding("k", "cursor_up", "Up", show=False),
    Binding("g,home", "scroll_top", "First", show=False),
    Binding("G,end", "scroll_bottom", "Last", show=False),
]


class FlowTable(DataTable[Text]):
    """One row per flow under ``flows/``, keyed by its name."""

    BINDINGS: ClassVar[list[BindingType]] = [
        *LIST_KEYS,
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

    def __init__(
        self,
        rows: list[dict[str, Any]],
        fit: tuple[bool, int] = (False, 0),
        selected: str | None = None,
        **kwargs: Any,
    ) -> None:
        """``fit``: ``set_fit``'s arguments, for the first frame to be drawn fitted;
        ``selected``: the flow the cursor starts on, when it is listed (the last one
        selected, ``core/ui_memory.py``)."""
        super().__init__(cursor_type="row", zebra_stripes=False, **kwargs)
        self.first_selected = selected
        self.rows_by_name: dict[str, dict[str, Any]] = {str(row["name"]): row for row in rows}
        self.filter_text = ""
        self.lane_facts: dict[str, dict[str, Any]] = {}  # `lanes --json`'s rows, by key
        self._theme: str | None = None
        self._widths: list[int] = []
        narrow, width = fit
        self.narrow = narrow
        self.fit_width: int | None = width if narrow else None  # ABOUT gets what is left

    @property
    def shown_columns(self) -> list[tuple[str, str]]:
        """The columns; USAGE (tokens in/out since the thread began) when any flow has it."""
        columns: tuple[tuple[str, str], ...] = COLUMNS
        if any(row.get("usage") for row in self.rows_by_name.values()):
            columns = (*COLUMNS[:-1], USAGE_COLUMN, COLUMNS[-1])
        return [c for c in columns if not (self.narrow and c[0] in NARROW_HIDES)]

    def set_fit(self, narrow: bool, width: int) -> None:
        """Fit the columns to a narrow screen (``width`` cells for the table) or not."""
        if (narrow, width if narrow else None) != (self.narrow, self.fit_width):
            self.narrow, self.fit_width = narrow, (width if narrow else None)
            self._redraw()

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
        lane = row.get("lane")
        if lane:  # grouped under its flow (lane_rows.grouped): its name, its git facts
            resumable = Text("")
            about = Text(lane_words(self.lane_facts.get(str(row["name"]))), style=muted)
        cells = {
            "flow": Text(f"  @{lane}") if lane else Text(str(row["name"])),
            "status": queued_text(self) if queued(row) else status_text(self, row.get("status")),
            "round": Text(round_label(int(row.get("round") or 0))),
            "resumable": resumable,
            "last_run": Text(str(row.get("last_run") or "—"), style=muted),
            "usage": Text(usage_short(row.get("usage")) or "—", style=muted),
            "about": about,
        }
        return [cells[key] for key, _ in self.shown_columns]

    def show_rows(self, rows: list[dict[str, Any]]) -> None:
        """Show ``rows`` (filtered); cells change in place when the flows are the same."""
        self.rows_by_name = {str(row["name"]): row for row in rows}
        self._redraw()

    def show_lane_facts(self, facts: dict[str, dict[str, Any]]) -> None:
        """What ``lanes --json`` says of each lane, shown in its row's ABOUT."""
        if facts != self.lane_facts:
            self.lane_facts = facts
            self._redraw()

    def is_lane(self, name: str | None) -> bool:
        """Whether ``name``'s row is a lane's (SPEC §23)."""
        return bool(name) and bool((self.rows_by_name.get(name or "") or {}).get("lane"))

    def update_row(self, name: str, **changes: Any) -> None:
        row = self.rows_by_name.get(name)
        if row is None:
            return
        row.update(changes)
        cells = self._cells(row)
        if self.filter_text and (name in self.rows) != _shows(cells, self.filter_text):
            self._redraw()  # it now matches the filter, or no longer does
            return
        if name not in self.rows:
            return  # filtered out
        if len(cells) != len(self._widths) or any(
            cell.cell_len > width for cell, width in zip(cells, self._widths, strict=True)
        ):
            self._redraw()  # a column must widen, or USAGE comes or goes
            return
        for (column, _), cell in zip(self.shown_columns, cells, strict=True):
            self.update_cell(name, column, cell)  # one row, as a live run moves on

    def apply_run(self, info: RunInfo) -> None:
        """A run moved on: update the rows of the flows it is the last run of (its own
        key, and the keys it called), without re-reading the index — USAGE too, as each
        of its sessions closes (what ``flows --json`` says: ``spending.thread_usage``)."""
        from flowdrop_tui.core.records.spend.usage import (
            total,  # a run polled: after the first frame
        )

        for key, round_ in info.key_rounds.items():
            row = self.rows_by_name.get(key)
            if row is None:
                continue
            last = row.get("last_run")
            newer = key == info.key and (not isinstance(last, str) or info.run > last)
            if newer or last == info.run:
                spent = total([info.chain_before.get(key), info.usage_of(key)])
                self.update_row(
                    key,
                    last_run=info.run,
                    status=str(info.status),
                    round=round_,
                    usage=spent.to_json() if spent is not None else None,
                    called_by=info.key if key != info.key else None,
                )

    def set_filter(self, text: str) -> None:
        """Show only the rows whose visible text contains ``text`` (any case)."""
        self.filter_text = text.strip().lower()
        self._redraw()

    def _redraw(self) -> None:
        """Show the visible rows, in place when only their cells changed.

        Column widths are worked out here from the cells and set explicitly: the
        table's own auto-width settles on a later idle, which would make what is on
        screen depend on timing."""
        every = {name: self._cells(row) for name, row in self.rows_by_name.items()}
        cells = {name: row for name, row in every.items() if _shows(row, self.filter_text)}
        columns = self.shown_columns
        widths = [
            min(MAX_WIDTH, max([len(label), *(row[n].cell_len for row in cells.values())]))
            for n, (_, label) in enumerate(columns)
        ]
        if self.fit_width is not None:  # ABOUT (last) takes what is left, cut to fit
            used = sum(widths[:-1]) + 2 * self.cell_padding * len(widths)
            widths[-1] = max(8, min(widths[-1], self.fit_width - used))
            for row_cells in cells.values():
                row_cells[-1].truncate(widths[-1], overflow="ellipsis")
        current = [str(row.key.value) for row in self.ordered_rows]
        if list(cells) == current and widths == self._widths:
            for name, row_cells in cells.items():
                for (column, _), cell in zip(columns, row_cells, strict=True):
                    self.update_cell(name, column, cell)
            return
        selected = self.selected_name if self.row_count else self.first_selected
        if cells:
            self.first_selected = None  # once rows are shown, the cursor is the user's
        self.clear(columns=True)
        self._widths = widths
        for (key, label), width in zip(columns, widths, strict=True):
            self.add_column(label, width=width, key=key)
        for name, row_cells in cells.items():
            self.add_row(*row_cells, key=name)
        if selected in cells:
            self.move_cursor(row=list(cells).index(selected))
        # Once the new rows are laid out: a rebuilt table must not leave the selected
        # row scrolled out of view while the panes below name it.
        self.call_after_refresh(scroll_cursor_into_view, self)

    def notify_style_update(self) -> None:
        super().notify_style_update()
        theme = self.app.theme if self.is_attached else None
        if theme != self._theme and self.columns:
            self._theme = theme
            self._redraw()  # a theme change recolours the statuses


def _shows(cells: list[Text], needle: str) -> bool:
    """Whether a row's text, as shown, contains ``needle`` (lower case)."""
    return not needle or needle in " ".join(cell.plain for cell in cells).lower()
