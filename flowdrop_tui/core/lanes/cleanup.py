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
from flowdrop_tui.core.lanes.lane_trees import Registered, registered
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
from flowdrop_tui.core.records.listing import key_runs
from flowdrop_tui.core.times import now_iso

# What an operation in progress in a worktree leaves in its git dir, in words.
_IN_PROGRESS = (
    ("rebase-merge", "a rebase"),
    ("rebase-apply", "a rebase"),
    ("MERGE_HEAD", "a merge"),
    ("CHERRY_PICK_HEAD", "a cherry-pick"),
    ("REVERT_HEAD", "a revert"),
)


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
    run: str | None = None  # the live run's id (what ``stop`` takes)
    other_live: str | None = None  # another lane whose live run works in this worktree
    foreign: str | None = None  # the worktree at the lane's path is not the lane's: what is
    busy: str | None = None  # an operation in progress in the worktree ("a rebase")
    detached: str | None = None  # the worktree's HEAD, detached off its branch (a sha)
    head_commits: int = 0  # commits only that detached HEAD reaches (no branch, tag, remote)
    checked_out: str | None = None  # another worktree that has the lane's branch checked out


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
        stop = f"flowdrop-tui stop {facts.run}" if facts.run else "its run (see: flowdrop-tui runs)"
        return Decision(
            refused=AlreadyRunningError(f"lane {key} has a live run; stop it first: {stop}")
        )
    if facts.other_live:
        return Decision(
            refused=AlreadyRunningError(
                f"lane {facts.other_live}'s live run works in lane {key}'s worktree; "
                "it is left as it is"
            )
        )
    if facts.foreign or (facts.exists and facts.busy):
        what = facts.foreign or f"{facts.busy} is in progress in it"
        return Decision(
            refused=UnmergedWorkError(
                f"lane {key}'s worktree is not removed: {what} — finish or undo that first "
                "(nothing was changed)"
            )
        )
    changed = () if facts.half_made else facts.changed
    keeps_branch = bool(facts.checked_out)
    losses = []
    if facts.exists and facts.detached:
        losses.append(
            f"its worktree is on a detached HEAD at {facts.detached[:7]} with "
            f"{facts.head_commits} commit(s) no branch has"
        )
    # Unsaved commits are at stake when the worktree would go (the rule) or the branch.
    if facts.unsaved and (facts.exists or (delete_branch and not keeps_branch)):
        losses.append(f"{facts.unsaved} commit(s) not merged into {base} nor pushed")
    if changed:
        shown = ", ".join(changed[:5]) + (
            f" and {len(changed) - 5} more" if len(changed) > 5 else ""
        )
        losses.append(f"uncommitted changes to {shown}")
    if losses and not archive:
        error = UnmergedWorkError if facts.unsaved or facts.detached else DirtyTreeError
        return Decision(
            refused=error(
                f"lane {key} holds work that would be lost: {'; '.join(losses)} — land it, "
                f"or save it first: flowdrop-tui lanes drop {key} --archive"
            )
        )
    head = bool(facts.exists and facts.detached and facts.head_commits)
    made = Decision(
        bundle=bool(archive and (facts.unsaved or head)), patch=bool(archive and changed)
    )
    saved = "archived first" if losses else "nothing unsaved in it"
    if facts.exists:
        made.remove_tree = True
        made.why["worktree"] = "clean, its commits merged or pushed" if not losses else saved
    else:
        made.why["worktree"] = "gone already"
    if not facts.branch:
        made.why["branch"] = "gone already"
    elif facts.checked_out:
        made.why["branch"] = f"checked out in the worktree at {facts.checked_out}"
    elif facts.unmerged == 0:
        made.delete_branch = True
        made.why["branch"] = f"merged into {base}"
    elif delete_branch:
        made.delete_branch = True
        made.why["branch"] = "its commits archived" if made.bundle else "its commits pushed"
    else:
        how = "--archive --delete-branch" if facts.unsaved else "--delete-branch"
        made.why["branch"] = f"{facts.unmerged} commit(s) not merged into {base}" + (
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
    trees = registered(layout, fd)
    here = next((w for w in trees if os.path.realpath(w.path) == target), None)
    half = here is not None and here.locked == "initializing"  # git's own mark
    branch = f"refs/heads/{lane.branch}"
    changed: tuple[str, ...] = ()
    if exists and not half:
        changed = tuple(changed_files(lane.path))
    tree = _tree_facts(layout, lane, here if exists and not half else None, fd)
    elsewhere = [str(w.path) for w in trees if w.branch == branch and w is not here]
    live = is_live(layout, lane)
    own = {
        "run": next(iter(key_runs.newest(layout, lane.key, limit=1)), None) if live else None,
        "other_live": next(
            (
                other.key
                for other in lanes(layout)
                if other.key != lane.key
                and os.path.realpath(other.path) == target
                and is_live(layout, other)
            ),
            None,
        ),
        "checked_out": elsewhere[0] if elsewhere else None,
        **tree,
    }
    found = git_lock.run(
        fd, ["rev-parse", "--verify", "--quiet", branch], cwd=layout.workspace,
        what=f"look up {lane.branch}", check=False,
    )  # fmt: skip
    if found.returncode != 0:
        return Facts(live, exists, half, changed, base=lane.base_branch, **own)
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
        live,
        exists,
        half,
        changed,
        True,
        unmerged,
        unsaved,
        lane.base_branch or (base[:12] if base else None),
        **own,
    )


def _tree_facts(
    layout: Layout, lane: Lane, here: Registered | None, fd: int | None
) -> dict[str, Any]:
    """The worktree's own HEAD is part of the lane's work: whether it is the lane's at
    all (on its branch or detached), an operation in progress, a detached HEAD's commits."""
    if here is None:
        return {}
    if here.branch is not None and here.branch != f"refs/heads/{lane.branch}":
        name = here.branch.removeprefix("refs/heads/")
        return {"foreign": f"the worktree at {here.path} is on branch {name}, not {lane.branch}"}
    found: dict[str, Any] = {}
    gitdir = git_lock.run(
        fd, ["rev-parse", "--absolute-git-dir"], cwd=lane.path,
        what=f"find lane {lane.key}'s git dir", check=False,
    )  # fmt: skip
    if gitdir.returncode == 0:
        where = Path(gitdir.stdout.strip())
        for mark, what in _IN_PROGRESS:
            if os.path.lexists(where / mark):
                found["busy"] = what
                break
    if here.branch is None and here.head:
        found["detached"] = here.head
        found["head_commits"] = _count(
            layout, [here.head, "--not", "--branches", "--tags", "--remotes"], fd
        )
    return found


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
                "commits": facts.unsaved + facts.head_commits if made.bundle else 0,
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
    elif not os.path.lexists(lane.path) and _registered_at(layout, lane.path, fd):
        # Only the lane's own entry goes (its folder gone): a global `worktree prune`
        # would take a person's own worktree that is briefly missing with it.
        git_lock.run(
            fd, ["worktree", "remove", "--force", str(lane.path)], cwd=layout.workspace,
            what=f"deregister lane {lane.key}'s worktree",
        )  # fmt: skip
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


def _registered_at(layout: Layout, path: Path, fd: int) -> bool:
    target = os.path.realpath(path)
    return any(os.path.realpath(w.path) == target for w in registered(layout, fd))


def _archive(layout: Layout, lane: Lane, facts: Facts, made: Decision, fd: int) -> dict[str, Any]:
    """The unsaved commits as a bundle, the uncommitted changes as a patch, each checked,
    and the ``lane_archived`` event naming them — before anything is removed."""
    stamp = now_iso().replace(":", "").replace("-", "")
    where = lane_log.archive_folder(layout, lane.key, stamp)
    found: dict[str, Any] = {"folder": str(where), "bundle": None, "patch": None, "head": None}
    if made.bundle:
        bundle = where / "commits.bundle"
        base = base_ref(layout, lane)
        heads = [f"refs/heads/{lane.branch}"] if facts.branch else []
        # A detached HEAD's commits go in too, under a ref of their own while bundled.
        head_ref = f"refs/flowdrop-archive/{stamp}/HEAD" if facts.head_commits else None
        if head_ref is not None and facts.detached:
            git_lock.run(
                fd, ["update-ref", head_ref, facts.detached], cwd=layout.workspace,
                what="name the detached HEAD",
            )  # fmt: skip
            heads.append(head_ref)
        spec = [*heads, *([f"^{base}"] if base else [])]
        try:
            git_lock.run(
                fd, ["bundle", "create", str(bundle), *spec], cwd=layout.workspace,
                what=f"bundle lane {lane.key}'s commits",
            )  # fmt: skip
        finally:
            if head_ref is not None:
                git_lock.run(
                    fd, ["update-ref", "-d", head_ref], cwd=layout.workspace,
                    what="drop the detached HEAD's name", check=False,
                )  # fmt: skip
        git_lock.run(
            fd, ["bundle", "verify", str(bundle)], cwd=layout.workspace,
            what=f"verify {bundle}",
        )  # fmt: skip
        found["bundle"], found["commits"] = str(bundle), facts.unsaved + facts.head_commits
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
