"""``diff RUN [--round N]`` (SPEC §20): what one round of a run changed.

A round's own commits run from its start commit (``round_started.head``) to its end
commit (``round_ended.moved.head``). What it left uncommitted is known only while
the working tree is still the one it left: the last round of the workspace's
latest run, with nothing committed since, in a workspace where runs run (not a
remote mode client: its runs ran in a worker's checkout). Then the diff runs from
the start commit to the working tree, untracked files included
(docs/decisions.md, "What a round changed").
"""

from __future__ import annotations

from typing import Any

from flowdrop_tui.core import git
from flowdrop_tui.core.errors import NotARepositoryError, NotFoundError
from flowdrop_tui.core.paths import CYCLE, Layout
from flowdrop_tui.core.records.event_lines import event_batches
from flowdrop_tui.core.records.run_fold import list_run_ids, load_run


def _span(rounds: list[int]) -> str:
    if not rounds:
        return "no rounds"
    first, last = rounds[0], rounds[-1]
    return f"round {first}" if first == last else f"rounds {first}–{last}"


def round_commits(
    layout: Layout, run_id: str
) -> tuple[Any, dict[int, tuple[str | None, str | None, bool]]]:
    """The run, and per round of its own flow: (start commit, end commit, ended)."""
    info = load_run(layout, run_id)
    found: dict[int, tuple[str | None, str | None, bool]] = {}
    for batch in event_batches(info.path / CYCLE):
        for ev in batch:
            number = ev.get("round")
            if ev.get("key") != info.key or not isinstance(number, int):
                continue
            if ev["event"] == "round_started":
                head = ev.get("head")
                found[number] = (head if isinstance(head, str) else None, None, False)
            elif ev["event"] == "round_ended" and number in found:
                moved = ev.get("moved")
                end = moved.get("head") if isinstance(moved, dict) else None
                found[number] = (found[number][0], end if isinstance(end, str) else None, True)
    return info, found


def round_diff(
    layout: Layout, run_id: str, number: int | None = None, *, worktree: bool = True
) -> dict[str, Any]:
    """``diff --json``: ``{"run", "round", "rounds", "start", "end", "uncommitted",
    "files": [{"path", "status"}], "patch"}``. ``worktree``: runs run in this
    workspace's working tree (local mode), so what a round left may still be there."""
    info, commits = round_commits(layout, run_id)
    ran = sorted(commits)
    if not ran:
        raise NotFoundError(f"run {run_id} ran no rounds: there is nothing to diff")
    if number is None:
        number = ran[-1]
    if number not in commits:
        raise NotFoundError(f"run {run_id} did not run round {number}; it ran {_span(ran)}")
    if info.git_start is None or not git.is_repository(layout.workspace):
        raise NotARepositoryError(
            f"{layout.workspace} is not a git repository: a round's changes are read from "
            "git, and this run recorded none"
        )
    start, end, ended = commits[number]
    last = number == ran[-1]
    if end is None and last:  # in flight, or cut short: where the run stands now
        for facts in (info.git_end, info.git_last):
            if isinstance(facts, dict) and isinstance(facts.get("head"), str):
                end = facts["head"]
                break
        else:
            end = git.run_end(layout.workspace, run_id)[0]
    now = git.head_now(layout.workspace)
    uncommitted = (
        worktree and last and list_run_ids(layout)[-1:] == [run_id] and (end is None or end == now)
    )
    if not uncommitted and end is None:
        end = start  # nothing recorded of its end: no commits known
    found = git.diff_between(layout.workspace, start, None if uncommitted else end)
    if found is None:
        raise NotFoundError(
            f"git could not compare round {number}'s commits ({(start or '')[:12]}.."
            f"{(end or 'the working tree')[:12]}): not in this repository any more?"
        )
    files, patch = found
    return {
        "run": run_id,
        "round": number,
        "rounds": [ran[0], ran[-1]],
        "start": start,
        "end": end if not uncommitted else now,
        "ended": ended,
        "uncommitted": bool(uncommitted),
        "files": files,
        "patch": patch,
    }
