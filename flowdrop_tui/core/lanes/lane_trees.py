"""Making a lane's worktree and branch (SPEC §23), under the lanes lock.

The lane's record comes first: its run's ``created`` event names the branch, the
path and the base before any of them exists, so a kill at any instant leaves nothing
the records do not know. ``ensure`` then makes what is missing — the branch from its
base, the worktree on it — and is what the lane's next run calls too: a worktree a
kill left half made (registered, no checkout) is removed and made again; one that
stands is used as it is, its changes and commits untouched."""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from flowdrop_tui.core.errors import GitError, NotARepositoryError
from flowdrop_tui.core.git import BRANCH_ENV
from flowdrop_tui.core.lanes import git_lock
from flowdrop_tui.core.lanes.known import lane_of
from flowdrop_tui.core.lanes.place import Lane, branch_for, worktree_for
from flowdrop_tui.core.paths import Layout, split_lane


@dataclass(frozen=True)
class Registered:
    """One entry of ``git worktree list --porcelain``."""

    path: Path
    head: str | None
    branch: str | None  # refs/heads/...; None: detached
    locked: str | None  # why it is locked ("initializing": a kill during its making)
    prunable: bool


def registered(layout: Layout, lock_fd: int | None = None) -> list[Registered]:
    """The repository's worktrees, as git lists them."""
    done = git_lock.run(
        lock_fd, ["worktree", "list", "--porcelain"], cwd=layout.workspace, what="list worktrees"
    )
    found: list[Registered] = []
    entry: dict[str, str] = {}
    for line in [*done.stdout.splitlines(), ""]:
        if line:
            word, _, rest = line.partition(" ")
            entry[word] = rest
            continue
        if "worktree" in entry:
            found.append(
                Registered(
                    path=Path(entry["worktree"]),
                    head=entry.get("HEAD"),
                    branch=entry.get("branch"),
                    locked=entry.get("locked") if "locked" in entry else None,
                    prunable="prunable" in entry,
                )
            )
        entry = {}
    return found


def branch_exists(layout: Layout, branch: str, lock_fd: int | None = None) -> bool:
    done = git_lock.run(
        lock_fd,
        ["rev-parse", "--verify", "--quiet", f"refs/heads/{branch}"],
        cwd=layout.workspace,
        what=f"look up {branch}",
        check=False,
    )
    return done.returncode == 0


def base_of(layout: Layout) -> tuple[str, str | None]:
    """The commit a new lane starts from (the workspace's HEAD) and its branch."""
    done = git_lock.run(
        None,
        ["rev-parse", "--verify", "--quiet", "HEAD"],
        cwd=layout.workspace,
        what="read HEAD",
        check=False,
    )
    if done.returncode != 0:
        inside = git_lock.run(
            None,
            ["rev-parse", "--is-inside-work-tree"],
            cwd=layout.workspace,
            what="look for a repository",
            check=False,
        )
        if inside.returncode != 0:
            raise NotARepositoryError(
                f"{layout.workspace} is not a git repository: a lane runs in a worktree of "
                "one (git init, commit, then run with --lane)"
            )
        raise NotARepositoryError(
            f"{layout.workspace} has no commit yet: a lane's branch starts from one "
            "(commit, then run with --lane)"
        )
    branch = git_lock.run(
        None,
        ["symbolic-ref", "--quiet", "--short", "HEAD"],
        cwd=layout.workspace,
        what="read the branch",
        check=False,
    )
    if branch.returncode != 0:  # detached: on a remote worker, the client's branch
        return done.stdout.strip(), os.environ.get(BRANCH_ENV) or None
    return done.stdout.strip(), branch.stdout.strip() or None


def ensure(layout: Layout, lane: Lane) -> Path:
    """The lane's worktree, made (with its branch) when missing; its path."""
    with git_lock.held(layout) as fd:
        return _ensure_locked(layout, lane, fd)


def _ensure_locked(layout: Layout, lane: Lane, fd: int) -> Path:
    target = os.path.realpath(lane.path)
    standing = [w for w in registered(layout, fd) if os.path.realpath(w.path) == target]
    for worktree in standing:
        if (worktree.locked or "").startswith("initializing") or not lane.path.exists():
            # git's own mark while it makes a worktree (a kill during the making: nothing
            # ran there yet), or a registration whose folder is gone: that entry alone
            # goes — never a global `git worktree prune`, which would forget a person's
            # worktree on a drive that is away for a moment
            git_lock.run(
                fd,
                ["worktree", "remove", "--force", "--force", str(lane.path)],
                cwd=layout.workspace,
                what=f"remove the half-made worktree {lane.path}",
                check=False,
            )
            continue
        if (
            worktree.branch == f"refs/heads/{lane.branch}"
            and worktree.locked is None
            and _whole(lane.path)
        ):
            return lane.path
        raise GitError(_not_runnable(lane, worktree))  # a person's doing: left as it is
    if lane.path.exists():
        if any(lane.path.iterdir()):
            raise GitError(
                f"{lane.path}, where lane {lane.key}'s worktree goes, holds files that are "
                "not a worktree of this repository; move them away and run the lane again"
            )
        shutil.rmtree(lane.path, ignore_errors=True)
    lane.path.parent.mkdir(parents=True, exist_ok=True)
    if branch_exists(layout, lane.branch, fd):
        args = ["worktree", "add", str(lane.path), lane.branch]
    elif lane.base is None:
        raise NotARepositoryError(f"lane {lane.key} has no base commit to make its branch from")
    else:
        args = ["worktree", "add", "-b", lane.branch, str(lane.path), lane.base]
    git_lock.run(fd, args, cwd=layout.workspace, what=f"make lane {lane.key}'s worktree")
    return lane.path


def _not_runnable(lane: Lane, worktree: Registered) -> str:
    """Why the lane's standing worktree is not one its run may use, and what to do; its
    files, commits and changes are never touched to make it so."""
    where = f"lane {lane.key}'s worktree {lane.path}"
    if worktree.locked is not None:
        why = f" ({worktree.locked})" if worktree.locked else ""
        return (
            f"{where} is locked{why}; unlock it (git worktree unlock {lane.path}) "
            "to run the lane there"
        )
    if worktree.branch is None:
        return (
            f"{where} is on a detached HEAD (a rebase or a checkout in progress?); finish "
            f"it and check out {lane.branch} there (git -C {lane.path} checkout "
            f"{lane.branch}) to run the lane again — nothing in it was changed"
        )
    if worktree.branch != f"refs/heads/{lane.branch}":
        return (
            f"{where} is on {worktree.branch.removeprefix('refs/heads/')}, not the lane's "
            f"{lane.branch}; check out {lane.branch} there to run the lane again"
        )
    return (
        f"{where} stands but its branch {lane.branch} has no commit (deleted by hand?); "
        f"make it there again (git -C {lane.path} checkout -b {lane.branch}) or keep its "
        f"changes with: flowdrop-tui lanes drop {lane.key} --archive"
    )


def _whole(path: Path) -> bool:
    """A worktree git can read (its ``.git`` file there and HEAD resolving)."""
    if not (path / ".git").exists():
        return False
    done = git_lock.run(
        None,
        ["rev-parse", "--verify", "--quiet", "HEAD"],
        cwd=path,
        what="read the lane's HEAD",
        check=False,
    )
    return done.returncode == 0


def lane_for(layout: Layout, key: str) -> Lane:
    """``key``'s lane: as its record says, or — its first run — a new one from the
    workspace's HEAD (recorded by that run's ``created`` event before anything is made)."""
    found = lane_of(layout, key)
    if found is not None:
        return found
    flow_key, name = split_lane(key)
    assert name is not None
    base, base_branch = base_of(layout)
    return Lane(
        key=key,
        flow_key=flow_key,
        name=name,
        branch=branch_for(flow_key, name),
        path=worktree_for(layout, flow_key, name),
        base=base,
        base_branch=base_branch,
    )
