"""The flow list as the UI's first frame shows it — discovery, the describe cache and
the index as on disk, no process and no run read — in a module that imports only what
that needs (``views`` re-exports it; bench/README.md, (c))."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from typing import Any

from flowdrop_tui.core.flows.discovery import (
    FlowInfo,
    FlowRef,
    describe_cached,
    discover,
    path_threads,
)
from flowdrop_tui.core.paths import Layout, split_lane
from flowdrop_tui.core.records.listing import index_file
from flowdrop_tui.core.records.listing.index_file import GRAPH_FLOW


def thread_refs(layout: Layout, data: dict[str, Any] | None = None) -> list[FlowRef]:
    """What the flow list lists: every flow by name, then every thread keyed by a path to
    a flow (``run flows/tick``), each its own row under its key (SPEC §2: two keys, two
    threads). ``data``: the index as read (default: loaded, rebuilt if need be)."""
    if data is None:
        from flowdrop_tui.core.records.listing import index  # its rebuild: not the first frame's

        data = index.load(layout)
    keys = data["keys"]
    return discover(layout) + path_threads(layout, keys)


def _lanes_by_flow(keys: Iterable[str]) -> dict[str, list[str]]:
    """The lane keys (SPEC §23) among ``keys``, by their flow's key, in lane order."""
    found: dict[str, list[str]] = {}
    for key in keys:
        flow, lane = split_lane(key)
        if lane is not None:
            found.setdefault(flow, []).append(key)
    for lanes in found.values():
        lanes.sort(key=_lane_order)
    return found


def _lane_order(key: str) -> tuple[int, str]:
    lane = split_lane(key)[1] or ""
    return (int(lane) if lane.isdigit() else 1 << 62, lane)


def with_lanes(infos: list[FlowInfo], keys: Iterable[str]) -> list[FlowInfo]:
    """SPEC §23: each flow followed by its lanes, a row per lane key the index holds,
    the flow's declaration under the lane's own key (its own round, runs and budget)."""
    lanes = _lanes_by_flow(keys)
    if not lanes:
        return infos
    named = {info.name for info in infos}
    listed = []
    for info in infos:
        listed.append(info)
        listed.extend(
            replace(info, name=key) for key in lanes.get(info.name, ()) if key not in named
        )
    return listed


def graph_threads(data: Any, named: set[str]) -> list[FlowInfo]:
    """LangGraph threads run with ``FlowdropSaver`` (SPEC §22), listed after the flows:
    keys whose runs name ``GRAPH_FLOW`` and no flow folder of their own."""
    return [
        FlowInfo(key, GRAPH_FLOW, True, "a LangGraph thread (FlowdropSaver)", None)
        for key, entry in sorted(data["keys"].items())
        if isinstance(entry, dict) and entry.get("flow") == GRAPH_FLOW and key not in named
    ]


# The statuses whose runs a checkout lists even without their flow (an index entry's).
_SHOWN_ABSENT = frozenset({"pending", "running"})


def absent_threads(data: Any, named: set[str]) -> list[FlowInfo]:
    """Keys whose last run is live but whose flow is not in this checkout (remote mode: a
    flow added on another branch a worker runs), listed after the flows so their live
    runs are seen here too — in ``flows`` and the UI's top line, as ``runs`` sees them."""
    found = []
    for key, entry in sorted(data["keys"].items()):
        if key in named or not isinstance(entry, dict) or entry.get("flow") == GRAPH_FLOW:
            continue
        if entry.get("status") not in _SHOWN_ABSENT or not isinstance(entry.get("last_run"), str):
            continue
        path = str(entry.get("flow") or key)
        error = (
            f"not in this checkout: {path} is missing here; its runs are read from their "
            "records (check out the branch that has it to run it from here)"
        )
        found.append(FlowInfo(key, path, None, "", error))
    return found


def quick_flow_rows(layout: Layout) -> list[dict[str, Any]]:
    """The flow list as far as it can be told without starting a process or reading runs:
    names from discovery, declarations from the describe cache (``described`` is False
    where it has none yet) and the index as it is on disk. What a first paint shows;
    ``flow_rows`` fills in the rest."""
    data = index_file.read(layout) or {"keys": {}}
    refs = thread_refs(layout, data)
    rows = []
    for ref, info in zip(refs, describe_cached(layout, refs), strict=True):
        entry = data["keys"].get(ref.key) or {}
        rows.append(
            {
                "name": ref.key,
                "by_path": ref.key != ref.name,
                "path": info.path if info else ref.rel(layout),
                "resumable": info.resumable if info else None,
                "error": info.error if info else None,
                "description": info.description if info else "",
                "round": int(entry.get("round") or 0),
                "last_run": entry.get("last_run"),
                "status": entry.get("status"),
                "described": info is not None,
            }
        )
    rows = _with_lane_rows(rows, data["keys"])
    named = {row["name"] for row in rows}
    extra = graph_threads(data, named)
    for graph in [*extra, *absent_threads(data, named | {info.name for info in extra})]:
        entry = data["keys"][graph.name]
        rows.append(
            {
                "name": graph.name,
                "by_path": "/" in graph.name,
                "path": graph.path,
                "resumable": graph.resumable,
                "error": graph.error,
                "description": graph.description,
                "round": int(entry.get("round") or 0),
                "last_run": entry.get("last_run"),
                "status": entry.get("status"),
                "described": True,
                "lane": None,
            }
        )
    return rows


def _with_lane_rows(rows: list[dict[str, Any]], keys: dict[str, Any]) -> list[dict[str, Any]]:
    """``quick_flow_rows``' flows, each followed by its lanes' rows (SPEC §23)."""
    lanes = _lanes_by_flow(keys)
    listed = []
    for row in rows:
        listed.append({**row, "lane": None})
        for key in lanes.get(row["name"], ()):
            entry = keys.get(key) or {}
            listed.append(
                {
                    **row,
                    "name": key,
                    "round": int(entry.get("round") or 0),
                    "last_run": entry.get("last_run"),
                    "status": entry.get("status"),
                    "lane": split_lane(key)[1],
                }
            )
    return listed
