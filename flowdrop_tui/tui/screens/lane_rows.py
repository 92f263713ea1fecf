"""A flow's lanes in the flow list (SPEC §23, "Seeing lanes"): each lane's row put
just after its flow's, and what ``lanes --json`` says of it (ahead/behind, a dirty
tree, landed) for the row's ABOUT. Called from the reads' thread workers."""

from __future__ import annotations

from typing import Any

from flowdrop_tui.core.lanes import overview
from flowdrop_tui.core.lanes.known import lane_keys
from flowdrop_tui.core.paths import Layout, split_lane
from flowdrop_tui.core.records.listing import index
from flowdrop_tui.core.records.run_record.liveness import live_pid
from flowdrop_tui.core.records.run_record.run_info import LIVE, TERMINAL, Status

_TERMINAL = frozenset(str(s) for s in TERMINAL)
_LIVE = frozenset(str(s) for s in LIVE)


def grouped(layout: Layout, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``rows`` with every lane row right after its flow's row, in lane order. Rows
    the flow listing made for lanes (``"lane"`` set) are kept; without them, the
    lanes the index knows get a row from their index entry."""
    if not any(row.get("lane") for row in rows):
        # A live lane's key may be listed as a thread not on disk (its flow's folder
        # is not named by it): its index row stands in for it.
        rows = [row for row in rows if split_lane(str(row["name"]))[1] is None]
        rows = [*rows, *_index_rows(layout, rows)]
    flows = [row for row in rows if not row.get("lane")]
    lanes: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        if row.get("lane"):
            lanes.setdefault(split_lane(str(row["name"]))[0], []).append(row)
    ordered: list[dict[str, Any]] = []
    for row in flows:
        ordered.append(row)
        ordered.extend(lanes.pop(str(row["name"]), []))
    for orphans in lanes.values():  # a lane whose flow is no longer listed: still shown
        ordered.extend(orphans)
    return ordered


def _index_rows(layout: Layout, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    entries = index.load(layout).get("keys") or {}
    flows = {str(row["name"]): row for row in rows}
    made = []
    for key in lane_keys(layout):
        flow_key, lane = split_lane(key)
        entry = _repaired(layout, key, entries.get(key) or {})
        flow = flows.get(flow_key) or {}
        made.append(
            {
                "name": key,
                "lane": lane,
                "by_path": False,
                "path": flow.get("path"),
                "resumable": flow.get("resumable"),
                "error": None,
                "description": "",
                "round": int(entry.get("round") or 0),
                "last_run": entry.get("last_run"),
                "status": entry.get("status"),
                "called_by": None,
                "usage": None,
                "described": True,
            }
        )
    return made


def _repaired(layout: Layout, key: str, entry: dict[str, Any]) -> dict[str, Any]:
    """The index entry as ``flows`` shows it: behind its run's record (a rebuilt index,
    a killed run) it is repaired from the record, and a live status whose process is
    gone reads interrupted."""
    last = entry.get("last_run")
    if not isinstance(last, str) or entry.get("status") in _TERMINAL:
        return entry
    if not (layout.runs / last).is_dir():
        return {**entry, "status": None}
    fixed = dict(index.repair(layout, key, entry) or entry)
    if fixed.get("status") in _LIVE and live_pid(layout.runs / last) is None:
        fixed["status"] = str(Status.INTERRUPTED)
    return fixed


def lane_facts(layout: Layout) -> dict[str, dict[str, Any]]:
    """Each lane's row of ``lanes --json``, by key (git is read: a thread worker's)."""
    return {str(row["key"]): row for row in overview.rows(layout)}
