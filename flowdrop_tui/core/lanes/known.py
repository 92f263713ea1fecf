"""The lanes the records know (SPEC §23): each lane's facts from its newest run's
``created`` event (every run of a lane carries them, so pruning its first run never
loses them), and the lanes of the workspace from the index's keys."""

from __future__ import annotations

from pathlib import Path

from flowdrop_tui.core.files import locks
from flowdrop_tui.core.lanes.place import Lane
from flowdrop_tui.core.paths import CYCLE, Layout, split_lane
from flowdrop_tui.core.records.listing import index, key_runs
from flowdrop_tui.core.records.log.event_lines import read_first_event


def lane_of(layout: Layout, key: str) -> Lane | None:
    """``key``'s lane as its newest run recorded it; ``None``: no run of it holds one."""
    if split_lane(key)[1] is None:
        return None
    for run_id in key_runs.newest(layout, key, limit=5):
        try:
            created = read_first_event(layout.runs / run_id / CYCLE)
        except OSError:
            continue
        if created is not None and created.get("event") == "created":
            lane = Lane.from_record(key, created.get("lane"))
            if lane is not None:
                return lane
    return None


def lane_keys(layout: Layout, flow_key: str | None = None) -> list[str]:
    """The lane keys the index knows (of ``flow_key`` only, when given), sorted."""
    keys = index.load(layout).get("keys") or {}
    found = []
    for key in keys:
        base, name = split_lane(key)
        if name is not None and (flow_key is None or base == flow_key):
            found.append(key)
    return sorted(found, key=_order)


def lanes(layout: Layout, flow_key: str | None = None) -> list[Lane]:
    """Every lane the records know (of ``flow_key`` only, when given)."""
    found = []
    for key in lane_keys(layout, flow_key):
        lane = lane_of(layout, key)
        if lane is not None:
            found.append(lane)
    return found


def is_live(layout: Layout, lane: Lane) -> bool:
    """Whether a live run holds the lane's key."""
    return locks.holder_pid(layout.key_lock(lane.key)) is not None


def _order(key: str) -> tuple[str, int, str]:
    base, name = split_lane(key)
    name = name or ""
    return (base, int(name) if name.isdigit() else 1 << 62, name)


def checkout_of(layout: Layout, key: str | None) -> Path:
    """The working tree ``key``'s runs work in, for their git facts, commits and diffs:
    ``layout.tree`` when set (this process runs it), a lane's worktree as its records
    name it (even once removed: its facts are then unknown, never the workspace's),
    else the workspace."""
    if layout.tree is not None:
        return layout.tree
    lane = lane_of(layout, key) if key else None
    return lane.path if lane is not None else layout.workspace
