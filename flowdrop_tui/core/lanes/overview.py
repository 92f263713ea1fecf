"""Seeing lanes (SPEC §23): one row per lane the records know, in ``lanes --json``'s
shape, for the CLI's table and the UI's lane rows alike.

Cheap by design: the index entry and the newest run's fold (cached) for status,
round, result and tokens; the lane's own log for landed and dropped; and at most two
git commands a lane — ``rev-list --left-right --count`` (ahead/behind its base) and,
when the worktree stands, ``status --porcelain`` (dirty)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from flowdrop_tui.core.errors import FlowdropError, GitError
from flowdrop_tui.core.lanes import git_lock, lane_log
from flowdrop_tui.core.lanes.known import lanes
from flowdrop_tui.core.lanes.place import Lane
from flowdrop_tui.core.paths import CYCLE, Layout
from flowdrop_tui.core.records.listing import index
from flowdrop_tui.core.records.log.event_lines import events_named
from flowdrop_tui.core.records.run_record.liveness import live_pid
from flowdrop_tui.core.records.run_record.run_fold import load_run
from flowdrop_tui.core.records.run_record.run_info import LIVE, Status
from flowdrop_tui.core.records.spend.usage import total

LANDED = "landed"
DROPPED = "lane_dropped"
ARCHIVED = "lane_archived"
LANDED_FIELDS = ("into", "method", "commit")
BROKEN = "broken (git worktree repair)"  # a worktree git cannot read: how to mend it
_LIVE = frozenset(str(s) for s in LIVE)


def rows(layout: Layout, flow_key: str | None = None) -> list[dict[str, Any]]:
    """Every lane the records know (of ``flow_key`` only, when given), flow then lane."""
    return [row(layout, lane) for lane in lanes(layout, flow_key)]


def row(layout: Layout, lane: Lane) -> dict[str, Any]:
    """One lane's row (SPEC §23, "Seeing lanes")."""
    entry = index.lookup(layout, lane.key) or {}
    run_id = entry.get("last_run") if isinstance(entry.get("last_run"), str) else None
    status = entry.get("status")
    if status in _LIVE and run_id is not None and live_pid(layout.runs / run_id) is None:
        status = str(Status.INTERRUPTED)  # its process is gone (as `flows` says it)
    exists = worktree_exists(lane.path)
    ahead, behind = ahead_behind(layout, lane)
    dirty, note = None, None
    if exists:
        # One broken worktree (its repository moved) is its row's note, not every row's end.
        try:
            dirty = bool(changed_files(lane.path))
        except GitError:
            note = BROKEN
    result, tokens = _run_facts(layout, lane.key, run_id)
    landed = lane_log.last(layout, lane.key, LANDED)
    return {
        "key": lane.key,
        "flow": lane.flow_key,
        "lane": lane.name,
        "status": status,
        "round": int(entry.get("round") or 0),
        "run": run_id,
        "branch": lane.branch,
        "path": str(lane.path),
        "base": lane.base,
        "base_branch": lane.base_branch,
        "ahead": ahead,
        "behind": behind,
        "dirty": dirty,
        "exists": exists,
        "note": note,
        "progress": last_progress(layout, run_id),
        "result": result,
        "tokens": tokens,
        "landed": {field: landed.get(field) for field in LANDED_FIELDS} if landed else None,
        # Dropped and not made again since (a later run of the lane makes its worktree anew).
        "dropped": not exists and lane_log.last(layout, lane.key, DROPPED) is not None,
    }


def worktree_exists(path: Path) -> bool:
    """Whether the lane's worktree stands (its folder with git's ``.git`` file)."""
    return os.path.lexists(path / ".git")


def base_ref(layout: Layout, lane: Lane) -> str | None:
    """What the lane is measured against: its base branch while it exists, else the
    commit it started from; ``None``: neither (an empty repository's lane)."""
    if lane.base_branch:
        done = git_lock.run(
            None,
            ["rev-parse", "--verify", "--quiet", f"refs/heads/{lane.base_branch}^{{commit}}"],
            cwd=layout.workspace,
            what=f"look up {lane.base_branch}",
            check=False,
        )
        if done.returncode == 0:
            return f"refs/heads/{lane.base_branch}"
    return lane.base


def ahead_behind(layout: Layout, lane: Lane) -> tuple[int | None, int | None]:
    """Commits of the lane's branch not in its base, and the other way; ``None`` when
    the branch (or any base) is gone."""
    base = base_ref(layout, lane)
    if base is None:
        return None, None
    done = git_lock.run(
        None,
        ["rev-list", "--left-right", "--count", f"{base}...refs/heads/{lane.branch}"],
        cwd=layout.workspace,
        what=f"count lane {lane.key}'s commits",
        check=False,
    )
    parts = done.stdout.split()
    if done.returncode != 0 or len(parts) != 2:
        return None, None
    return int(parts[1]), int(parts[0])


def changed_files(path: Path) -> list[str]:
    """What the worktree holds uncommitted (tracked changes and untracked files), as
    ``git status --porcelain`` names them; raises ``GitError`` when git cannot read it."""
    done = git_lock.run(
        None,
        ["status", "--porcelain", "--untracked-files=all", "-z"],
        cwd=path,
        what=f"read {path}'s changes",
    )
    names = []
    fields = done.stdout.split("\0")
    at = 0
    while at < len(fields):
        item = fields[at]
        at += 1
        if len(item) < 4:
            continue
        names.append(item[3:])
        if item[0] in "RC":
            at += 1  # a rename's source follows
    return names


def last_progress(layout: Layout, run_id: str | None) -> Any:
    """The last ``run.progress`` value the run declared (its rounds' ends record it)."""
    if run_id is None:
        return None
    value = None
    try:
        for event in events_named(layout.runs / run_id / CYCLE, "round_ended"):
            if "progress" in event:
                value = event["progress"]
    except OSError:
        return None
    return value


def _run_facts(layout: Layout, key: str, run_id: str | None) -> tuple[Any, int | None]:
    """The run's result, and what the lane's thread spent through it (tokens)."""
    if run_id is None:
        return None, None
    try:
        info = load_run(layout, run_id)
    except FlowdropError:
        return None, None
    spent = total([info.chain_before.get(key), info.usage_of(key)])
    return info.result, spent.tokens if spent is not None else None
