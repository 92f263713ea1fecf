"""Statuses as coloured text. The colours live in ``flowdrop.tcss`` as component
classes (``status--running`` …) set from theme variables, so a theme change
recolours them and nothing here names a colour."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.widget import Widget

from flowdrop_tui.format import status_label

STATUSES = (
    "never",
    "pending",
    "running",
    "paused",
    "completed",
    "failed",
    "cancelled",
    "interrupted",
)
STATUS_CLASSES = frozenset(f"status--{name}" for name in STATUSES)


def status_text(widget: Widget, status: Any) -> Text:
    """``status`` as the widget's themed text ("never run" for ``None``)."""
    name = str(status) if status in STATUSES else "never"
    style = widget.get_component_rich_style(f"status--{name}", partial=True)
    return Text(status_label(status), style=style)


def queued(row: dict[str, Any]) -> bool:
    """A flow row whose start waits for a worker (remote mode) and has no live run."""
    return bool(row.get("queued")) and row.get("status") not in ("pending", "running")


def queued_text(widget: Widget) -> Text:
    """A queued start's status cell: not started yet, as ``pending`` is shown."""
    style = widget.get_component_rich_style("status--pending", partial=True)
    return Text("queued", style=style)
