"""``diff RUN [--round N]`` (SPEC §20): what one round of a run changed.

A round that counted toward ``stalled`` (an agent session, or ``stall_on="all"``)
kept snapshots of the working tree as it began and ended (``round_ended.moved.snapshot``:
tree objects, ``tree_snapshots.Snapshots``): its diff is between them, committed or not, for every
round of every run. Any other round recorded its commits only: from its start commit
(``round_started.head``) to its end commit (``round_ended.moved.head``). What such a
round left uncommitted is known only while the working tree is still the one it left:
the last round of the workspace's latest run, with nothing committed since, in a
workspace where runs run (not a remote mode client: its runs ran in a worker's
checkout); then the diff runs from the start commit to the working tree, untracked
files included (docs/decisions.md, "What a round changed").
"""

from __future__ import annotations

from typing import Any

from flowdrop_tui.core import git
from flowdrop_tui.core.errors import NotARepositoryError, NotFoundError
from flowdrop_tui.core.lanes.known import checkout_of
from flowdrop_tui.core.paths import CYCLE, Layout
from flowdrop_tui.core.records.listing import key_runs
from flowdrop_tui.core.records.log.event_lines import event_batches
from flowdrop_tui.core.records.run_record.run_fold import list_run_ids, load_run
from flowdrop_tui.core.records.run_record.run_info import LIVE


def _span(rounds: list[int]) -> str:
    if not rounds:
        return "no rounds"
    first, last = rounds[0], rounds[-1]
    return f"round {first}" if first == last else f"rounds {first}–{last}"


class Round:
    """What the record says of one round of the run's own flow."""

    def __init__(self, start: str | None, before: dict[str, str] | None) -> None:
        self.start = start  # its start commit
        self.end: str | None = None  # its end commit
        self.ended = False
        self.before = before  # files differing from HEAD just before it, and digests
        self.after: dict[str, str] | None = None  # and as it ended
        self.trees: tuple[str, str] | None = None  # snapshots as it began and ended
        self.skipped: list[str] = []  # big files the snapshots left as the index had them
        self.counted: bool | None = None  # False: no agent session, only HEAD recorded

    def left(self) -> set[str] | None:
        """The files this round changed and did not commit (by their digests), or None
        when the record cannot tell (too many files, a round with no end)."""
        if self.before is None or self.after is None:
            return None
        gone = {path for path in self.before if path not in self.after}
        return gone | {p for p, d in self.after.items() if self.before.get(p) != d}


def _paths(value: Any) -> dict[str, str] | None:
    if not isinstance(value, dict):
        return None
    return {str(k): str(v) for k, v in value.items()}


def round_commits(layout: Layout, run_id: str) -> tuple[Any, dict[int, Round]]:
    """The run, and what its record says of each round of its own flow."""
    info = load_run(layout, run_id)
    found: dict[int, Round] = {}
    previous: dict[str, str] | None = None  # the last round's end, in this record
    for batch in event_batches(info.path / CYCLE):
        for ev in batch:
            number = ev.get("round")
            if ev["event"] in ("resumed", "started"):
                previous = None  # a new process: its first round carries its own
            if ev.get("key") != info.key or not isinstance(number, int):
                continue
            if ev["event"] == "round_started":
                head = ev.get("head")
                before = _paths(ev["paths"]) if "paths" in ev else previous
                found[number] = Round(head if isinstance(head, str) else None, before)
            elif ev["event"] == "round_ended" and number in found:
                moved = ev.get("moved")
                moved = moved if isinstance(moved, dict) else {}
                one = found[number]
                end = moved.get("head")
                one.end = end if isinstance(end, str) else None
                one.ended = True
                one.after = previous = _paths(moved.get("paths"))
                counted = moved.get("counted")
                one.counted = counted if isinstance(counted, bool) else None
                trees = moved.get("snapshot")
                if isinstance(trees, dict):
                    begin, stop = trees.get("start"), trees.get("end")
                    if isinstance(begin, str) and isinstance(stop, str):
                        one.trees = (begin, stop)
                skipped = moved.get("skipped")
                if isinstance(skipped, list):
                    one.skipped = [str(path) for path in skipped]
    return info, found


def round_diff(
    layout: Layout, run_id: str, number: int | None = None, *, worktree: bool = True
) -> dict[str, Any]:
    """``diff --json``: ``{"run", "round", "rounds", "start", "end", "uncommitted",
    "files": [{"path", "status"}], "patch"}``. ``worktree``: runs run in this
    workspace's working tree (local mode), so what a round left may still be there."""
    info, commits = round_commits(layout, run_id)
    tree = checkout_of(layout, info.key)  # a lane's rounds are its worktree's (SPEC §23)
    ran = sorted(commits)
    if not ran:
        raise NotFoundError(f"run {run_id} ran no rounds: there is nothing to diff")
    if number is None:
        number = ran[-1]
    if number not in commits:
        raise NotFoundError(f"run {run_id} did not run round {number}; it ran {_span(ran)}")
    if info.git_start is None or not git.is_repository(tree):
        raise NotARepositoryError(
            f"{tree} is not a git repository: a round's changes are read from "
            "git, and this run recorded none"
        )
    this = commits[number]
    if this.trees is not None:
        found = git.diff_between(tree, *this.trees)
        if found is not None:  # its snapshots: what it changed, committed or not
            files, patch, _ = found
            # uncommitted: a file it changed is not, at its end, as its end commit has it
            end_tree = git.tree_of(tree, this.end) if this.end else None
            unlike = (
                git.diff_between(tree, end_tree, this.trees[1], {row["path"] for row in files})
                if end_tree is not None
                else None
            )
            return {
                "run": run_id,
                "round": number,
                "rounds": [ran[0], ran[-1]],
                "start": this.start,
                "end": this.end,
                "ended": this.ended,
                "uncommitted": bool(unlike is not None and unlike[0]),
                "snapshots": list(this.trees),
                "files": files,
                "patch": patch,
                "skipped": this.skipped,
                "commits_only": False,
            }
        # a worker's snapshots this repository does not have: its commits, as below
    start, end, ended = this.start, this.end, this.ended
    last = number == ran[-1]
    now = git.head_now(tree)
    if end is None and last:  # in flight, or cut short: where the run stands now
        if info.status in LIVE and worktree:
            end = now  # its checkout's HEAD: the record's git facts are from its start
        else:
            for facts in (info.git_end, info.git_last):
                if isinstance(facts, dict) and isinstance(facts.get("head"), str):
                    end = facts["head"]
                    break
            else:
                end = git.run_end(tree, run_id)[0]
    # the working tree is the run's only while it is the newest run there: a lane's
    # worktree is its key's alone (SPEC §23), the workspace every other run's
    newest = (
        key_runs.newest(layout, info.key, limit=1)
        if tree != layout.workspace and info.key
        else list_run_ids(layout)[-1:]
    )
    uncommitted = worktree and last and newest == [run_id] and (end is None or end == now)
    if not uncommitted and end is None:
        end = start  # nothing recorded of its end: no commits known
    found = git.diff_between(tree, start, end if end is not None else now)
    if found is not None and uncommitted:
        # the working tree, but only the files the round committed or left changed:
        # what was already there before it stays out (when the record can tell); a
        # round that recorded no files (no agent session) shows only its commits
        left = this.left()
        if left is None and this.counted is False:
            uncommitted, end = False, end if end is not None else now
        else:
            only = None if left is None else left | {row["path"] for row in found[0]}
            found = git.diff_between(tree, start, None, only)
    if found is None:
        raise NotFoundError(
            f"git could not compare round {number}'s commits ({(start or '')[:12]}.."
            f"{(end or 'the working tree')[:12]}): not in this repository any more?"
        )
    files, patch, skipped = found
    return {
        "run": run_id,
        "round": number,
        "rounds": [ran[0], ran[-1]],
        "start": start,
        "end": end if not uncommitted else now,
        "ended": ended,
        "uncommitted": bool(uncommitted),
        "snapshots": None,
        "files": files,
        "patch": patch,
        "skipped": skipped,
        # only its commits are known: what it left uncommitted was not kept
        "commits_only": not uncommitted,
    }
