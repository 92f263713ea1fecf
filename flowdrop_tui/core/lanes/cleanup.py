"""Dropping a lane's worktree without losing its work (SPEC §23, "Cleanup never loses
work"): ``lanes drop`` and what ``prune`` drops.

The rule is ``decide``, a pure function of what git says of the lane (``Facts``): the
worktree goes only when its tree is clean and every commit of its branch is merged
into its base or pushed (reachable from a remote-tracking ref, or the branch's
upstream) — else the command refuses, naming what would be lost, unless ``archive``:
the unsaved commits go into a git bundle and the uncommitted changes (untracked and
binary files too) into a patch, both checked and named in a ``lane_archived`` event
of the lane's log before anything is removed. The branch goes only when merged into
its base, or with ``delete_branch`` once nothing of it is unsaved (pushed or
archived). Everything is done under the workspace's lanes lock."""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from flowdrop_tui.core.errors import (
    AlreadyRunningError,
    DirtyTreeError,
    GitError,
    LockTimeoutError,
    NotFoundError,
    UnmergedWorkError,
)
from flowdrop_tui.core.lanes import git_lock, lane_log
from flowdrop_tui.core.lanes.known import is_live, lane_of, lanes
from flowdrop_tui.core.lanes.lane_trees import registered
from flowdrop_tui.core.lanes.overview import (
    ARCHIVED,
    DROPPED,
    LANDED,
    base_ref,
    changed_files,
    worktree_exists,
)
from flowdrop_tui.core.lanes.place import Lane
from flowdrop_tui.core.paths import Layout
from flowdrop_tui.core.times import now_iso


@dataclass(frozen=True)
class Facts:
    """What the rule looks at: one lane as git has it now."""

    live: bool = False  # a run holds the lane's key
    exists: bool = False  # its worktree stands
    half_made: bool = False  # registered by a kill mid-``worktree add``: nothing in it
    changed: tuple[str, ...] = ()  # uncommitted files (tracked changes and untracked)
    branch: bool = False  # its branch exists
    unmerged: int = 0  # commits of its branch not in its base
    unsaved: int = 0  # of those, the ones no remote-tracking ref (or upstream) has
    base: str | None = None  # what the lane is measured against (named in the words)


@dataclass
class Decision:
    """What ``drop`` does: each part with why; ``refused``: the error, nothing done."""

    refused: Exception | None = None
    remove_tree: bool = False
    delete_branch: bool = False
    bundle: bool = False  # archive the unsaved commits
    patch: bool = False  # archive the uncommitted changes
    why: dict[str, str] = field(default_factory=dict)


def decide(
    key: str, facts: Facts, *, archive: bool = False, delete_branch: bool = False
) -> Decision:
    """The cleanup rule (pure: the property test drives it with every history)."""
    base = facts.base or "its base"
    if facts.live:
        return Decision(
            refused=AlreadyRunningError(f"lane {key} has a live run; stop it first (stop {key})")
        )
    changed = () if facts.half_made else facts.changed
    losses = []
    # Unsaved commits are at stake when the worktree would go (the rule) or the branch.
    if facts.unsaved and (facts.exists or delete_branch):
        losses.append(f"{facts.unsaved} commit(s) not merged into {base} nor pushed")
    if changed:
        shown = ", ".join(changed[:5]) + (
            f" and {len(changed) - 5} more" if len(changed) > 5 else ""
        )
        losses.append(f"uncommitted changes to {shown}")
    if losses and not archive:
        error = UnmergedWorkError if facts.unsaved else DirtyTreeError
        return Decision(
            refused=error(
                f"lane {key} holds work that would be lost: {'; '.join(losses)} — land it, "
                f"or save it first: flowdrop-tui lanes drop {key} --archive"
            )
        )
    made = Decision(bundle=bool(archive and facts.unsaved), patch=bool(archive and changed))
    saved = "archived first" if losses else "nothing unsaved in it"
    if facts.exists:
        made.remove_tree = True
        made.why["worktree"] = "clean, its commits merged or pushed" if not losses else saved
    else:
        made.why["worktree"] = "gone already"
    if not facts.branch:
        made.why["branch"] = "gone already"
    elif facts.unmerged == 0:
        made.delete_branch = True
        made.why["branch"] = f"merged into {base}"
    elif delete_branch:
        made.delete_branch = True
        made.why["branch"] = "its commits archived" if made.bundle else "its commits pushed"
    else:
        how = "--archive --delete-branch" if facts.unsaved else "--delete-branch"
        made.why["branch"] = f"kept: {facts.unmerged} commit(s) not merged into {base}" + (
            "" if made.bundle else f"; {how} deletes it"
        )
    return made


def drop(
    layout: Layout,
    key: str,
    *,
    archive: bool = False,
    delete_branch: bool = False,
    dry_run: bool = False,
) -> dict[str, Any]:
    """``lanes drop``: the lane's worktree (and branch) removed by the rule; what was
    removed, kept and archived, and why. A refusal raises, nothing changed."""
    lane = lane_of(layout, key)
    if lane is None:
        raise NotFoundError(f"no lane {key}: the records hold no run of it (see: lanes)")
    with git_lock.held(layout) as fd:
        facts = facts_of(layout, lane, fd)
        made = decide(key, facts, archive=archive, delete_branch=delete_branch)
        if made.refused is not None:
            raise made.refused
        return _carry_out(layout, lane, facts, made, fd, dry_run=dry_run)


def facts_of(layout: Layout, lane: Lane, fd: int | None = None) -> Facts:
    """What git says of the lane now (a few commands; no write)."""
    exists = worktree_exists(lane.path)
    target = os.path.realpath(lane.path)
    half = any(
        os.path.realpath(w.path) == target and w.locked == "initializing"  # git's own mark
        for w in registered(layout, fd)
    )
    changed: tuple[str, ...] = ()
    if exists and not half:
        changed = tuple(changed_files(lane.path))
    branch = f"refs/heads/{lane.branch}"
    found = git_lock.run(
        fd, ["rev-parse", "--verify", "--quiet", branch], cwd=layout.workspace,
        what=f"look up {lane.branch}", check=False,
    )  # fmt: skip
    if found.returncode != 0:
        return Facts(is_live(layout, lane), exists, half, changed, base=lane.base_branch)
    base = base_ref(layout, lane)
    against = [branch, *([f"^{base}"] if base else [])]
    unmerged = _count(layout, against, fd)
    unsaved = unmerged
    if unmerged:
        upstream = git_lock.run(
            fd, ["rev-parse", "--verify", "--quiet", f"{branch}@{{upstream}}"],
            cwd=layout.workspace, what="read the upstream", check=False,
        )  # fmt: skip
        pushed = [f"^{upstream.stdout.strip()}"] if upstream.returncode == 0 else []
        unsaved = _count(layout, [*against, *pushed, "--not", "--remotes"], fd)
    return Facts(
        is_live(layout, lane),
        exists,
        half,
        changed,
        True,
        unmerged,
        unsaved,
        lane.base_branch or (base[:12] if base else None),
    )


def _count(layout: Layout, spec: list[str], fd: int | None) -> int:
    done = git_lock.run(
        fd, ["rev-list", "--count", *spec], cwd=layout.workspace, what="count the lane's commits"
    )
    return int(done.stdout.strip() or 0)


def _carry_out(
    layout: Layout, lane: Lane, facts: Facts, made: Decision, fd: int, *, dry_run: bool
) -> dict[str, Any]:
    answer: dict[str, Any] = {
        "key": lane.key,
        "dry_run": dry_run,
        "worktree": {
            "path": str(lane.path),
            "done": "removed" if made.remove_tree else "gone",
            "why": made.why["worktree"],
        },
        "branch": {
            "name": lane.branch,
            "done": "deleted" if made.delete_branch else ("gone" if not facts.branch else "kept"),
            "why": made.why["branch"],
        },
        "archive": None,
    }
    if dry_run:
        if made.bundle or made.patch:
            answer["archive"] = {
                "commits": facts.unsaved if made.bundle else 0,
                "files": list(facts.changed),
            }
        return answer
    if made.bundle or made.patch:
        answer["archive"] = _archive(layout, lane, facts, made, fd)
    if made.remove_tree:
        force = ["--force", "--force"] if made.patch or facts.half_made else []
        git_lock.run(
            fd, ["worktree", "remove", *force, str(lane.path)], cwd=layout.workspace,
            what=f"remove lane {lane.key}'s worktree",
        )  # fmt: skip
    git_lock.run(fd, ["worktree", "prune"], cwd=layout.workspace, what="prune worktrees")
    if made.delete_branch:
        git_lock.run(
            fd, ["branch", "-D", lane.branch], cwd=layout.workspace,
            what=f"delete {lane.branch}",
        )  # fmt: skip
    lane_log.append(
        layout,
        lane.key,
        DROPPED,
        worktree=answer["worktree"],
        branch=answer["branch"],
        archive=(answer["archive"] or {}).get("folder"),
    )
    return answer


def _archive(layout: Layout, lane: Lane, facts: Facts, made: Decision, fd: int) -> dict[str, Any]:
    """The unsaved commits as a bundle, the uncommitted changes as a patch, each checked,
    and the ``lane_archived`` event naming them — before anything is removed."""
    stamp = now_iso().replace(":", "").replace("-", "")
    where = lane_log.archive_folder(layout, lane.key, stamp)
    found: dict[str, Any] = {"folder": str(where), "bundle": None, "patch": None, "head": None}
    if made.bundle:
        bundle = where / "commits.bundle"
        base = base_ref(layout, lane)
        spec = [f"refs/heads/{lane.branch}", *([f"^{base}"] if base else [])]
        git_lock.run(
            fd, ["bundle", "create", str(bundle), *spec], cwd=layout.workspace,
            what=f"bundle lane {lane.key}'s commits",
        )  # fmt: skip
        git_lock.run(
            fd, ["bundle", "verify", str(bundle)], cwd=layout.workspace,
            what=f"verify {bundle}",
        )  # fmt: skip
        found["bundle"], found["commits"] = str(bundle), facts.unsaved
    if made.patch:
        found["head"], found["patch"] = _patch(lane.path, where / "changes.patch", fd)
        found["files"] = list(facts.changed)
    lane_log.append(layout, lane.key, ARCHIVED, **found)
    return found


def _patch(tree: Path, patch: Path, fd: int) -> tuple[str, str]:
    """The worktree's changes against its HEAD — tracked, untracked, binary — written
    to ``patch`` through a temporary index (the lane's own index untouched); its HEAD."""
    index = patch.with_name(".archive-index")
    env = {"GIT_INDEX_FILE": str(index)}
    # git writes the patch itself (--output): a non-UTF-8 file's change stays exact
    try:
        head = git_lock.run(fd, ["rev-parse", "HEAD"], cwd=tree, what="read the lane's HEAD")
        for args in (["read-tree", "HEAD"], ["add", "--all", "--", "."]):
            git_lock.run(fd, args, cwd=tree, what="gather the lane's changes", env=env)
        git_lock.run(
            fd,
            ["diff", "--cached", "--binary", "--full-index", f"--output={patch}", "HEAD"],
            cwd=tree,
            what="write the lane's changes as a patch",
            env=env,
        )  # fmt: skip
    finally:
        with contextlib.suppress(FileNotFoundError):
            index.unlink()
    try:
        with open(patch, "rb") as handle:
            os.fsync(handle.fileno())
            empty = os.fstat(handle.fileno()).st_size == 0
    except OSError:
        empty = True
    if empty:
        raise GitError(f"the lane's changes in {tree} made no patch; nothing was removed")
    return head.stdout.strip(), str(patch)


def prune_lanes(layout: Layout, *, dry_run: bool = False) -> list[dict[str, Any]]:
    """``prune``'s part (SPEC §16, §23): the worktrees of lanes landed or merged and
    clean, by the same rule and never archiving — a dirty lane, one with unsaved
    commits or a live run stays. What was (``dry_run``: would be) dropped."""
    dropped = []
    for lane in lanes(layout):
        if not worktree_exists(lane.path):
            continue
        # A lane git cannot read now (a lock held, a damaged worktree) is looked at again
        # by the next prune: prune never fails for a lane's sake.
        with contextlib.suppress(GitError, LockTimeoutError), git_lock.held(layout) as fd:
            facts = facts_of(layout, lane, fd)
            landed = lane_log.last(layout, lane.key, LANDED) is not None
            if not (landed or (facts.branch and facts.unmerged == 0)):
                continue
            made = decide(lane.key, facts)
            if made.refused is None:
                dropped.append(_carry_out(layout, lane, facts, made, fd, dry_run=dry_run))
    return dropped
