"""A flow's lanes in the flow list (SPEC §23, "Seeing lanes"): each lane's row kept
just after its flow's, and what ``lanes --json`` says of it (ahead/behind, a dirty
tree, landed) for the row's ABOUT. Called from the reads' thread workers."""

from __future__ import annotations

from typing import Any

from flowdrop_tui.core.lanes import overview
from flowdrop_tui.core.paths import Layout, split_lane


def grouped(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``rows`` (``flows --json``'s: a lane's row has ``"lane"``) with every lane row
    right after its flow's row, in the listing's order; a lane whose flow is not
    listed is still shown, at the end."""
    lanes: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        if row.get("lane"):
            lanes.setdefault(split_lane(str(row["name"]))[0], []).append(row)
    ordered: list[dict[str, Any]] = []
    for row in rows:
        if not row.get("lane"):
            ordered.append(row)
            ordered.extend(lanes.pop(str(row["name"]), []))
    for orphans in lanes.values():
        ordered.extend(orphans)
    return ordered


def lane_facts(layout: Layout) -> dict[str, dict[str, Any]]:
    """Each lane's row of ``lanes --json``, by key (git is read: a thread worker's)."""
    return {str(row["key"]): row for row in overview.rows(layout)}
