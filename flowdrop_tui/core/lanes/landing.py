"""Landing a lane (SPEC §23: "Landing is explicit"): the lane's branch into a target
branch, by a merge commit, one squashed commit, or its commits replayed, under the
lanes lock — and a refusal changes nothing.

Every method first makes the new commit without touching any checkout: ``merge`` and
``squash`` through ``git merge-tree --write-tree`` and ``commit-tree`` (a conflict is
found there, before anything is written), ``rebase`` by replaying the lane's commits in
a temporary detached worktree that is removed after (never in a person's checkout, and
the lane's branch never moves). The new commit always descends from the target's tip,
so it lands by a fast-forward: in the checkout that has the target checked out (which
must be clean, with no untracked or ignored file where the landing writes one, and still
have the target checked out at the commit read; its files then match the new commit),
or, when none does, by ``update-ref <ref> <new> <old>`` — a target that moved meanwhile
is not overwritten."""

from __future__ import annotations

import os
import shutil
import uuid
from pathlib import Path
from typing import Any

from flowdrop_tui.core.errors import (
    AlreadyRunningError,
    DirtyTreeError,
    GitError,
    LandConflictError,
    NotFoundError,
    RefusedError,
    UsageError,
)
from flowdrop_tui.core.lanes import git_lock, lane_log
from flowdrop_tui.core.lanes.fetching import fetch_lane
from flowdrop_tui.core.lanes.known import is_live, lane_of, lanes
from flowdrop_tui.core.lanes.lane_trees import branch_exists, registered
from flowdrop_tui.core.lanes.place import Lane, lanes_dir
from flowdrop_tui.core.paths import Layout
from flowdrop_tui.core.records.listing import key_runs

METHODS = ("merge", "squash", "rebase")
_SHOWN = 10  # conflicting files named in a refusal; the rest counted


def land(
    layout: Layout,
    key: str,
    *,
    into: str | None = None,
    method: str = "merge",
    remote: bool = False,
) -> dict[str, Any]:
    """Land lane ``key`` into ``into`` (default: its base branch) by ``method``;
    ``{"lane", "into", "method", "commit"}``. Every refusal leaves every ref, index and
    file as it was. ``remote``: the lane ran on workers (``mode.lanes_on_origin``), so
    its branch is fetched from the origin (fast-forward only) after the refusals that
    need no tip: a later refusal leaves that branch up to date, all else as it was."""
    if method not in METHODS:
        raise UsageError(f"unknown landing method {method!r}: use one of {', '.join(METHODS)}")
    lane = lane_of(layout, key)
    if lane is None:
        raise NotFoundError(f"no lane {key} is recorded here (see: flowdrop-tui lanes)")
    target = into if into is not None else lane.base_branch
    if target is None:
        raise UsageError(
            f"lane {key} was made from a detached HEAD, so it has no branch to land into "
            "by default: name one with --into BRANCH"
        )
    with git_lock.held(layout) as fd:
        _refuse_live(layout, lane)
        if not branch_exists(layout, lane.branch, fd):
            raise NotFoundError(
                f"lane {key}'s branch {lane.branch} is gone: nothing to land "
                "(see: flowdrop-tui lanes)"
            )
        if not branch_exists(layout, target, fd):
            raise NotFoundError(f"no branch {target} to land lane {key} into")
        if target == lane.branch:
            raise UsageError(f"lane {key} cannot be landed into its own branch {target}")
        _refuse_live_target(layout, lane, target)
        _refuse_dirty_lane(layout, lane, fd)
        checkout = _checked_out(layout, target, fd)
        if checkout is not None:
            _refuse_dirty_target(checkout, target)
        tip = lane_tip(layout, lane, fd, remote=remote)  # remote: its branch fetched first
        old = _rev(layout, f"refs/heads/{target}")
        if (
            _git(layout, ["rev-list", "--count", f"{old}..{tip}"], "count the lane's commits")
            == "0"
        ):
            raise RefusedError(
                f"lane {key} has no commit that {target} does not already have: nothing to land"
            )
        new = _made(layout, lane, target, old, tip, method, fd)
        if checkout is not None:
            _refuse_in_the_way(layout, checkout, target, old, new)
            fast_forward_checkout(checkout, target, old, new, fd)
        else:
            git_lock.run(
                fd,
                ["update-ref", "-m", f"flowdrop-tui land {key}", f"refs/heads/{target}", new, old],
                cwd=layout.workspace,
                what=f"move {target} to the landed commit",
            )
        lane_log.append(layout, key, "landed", into=target, method=method, commit=new)
    return {"lane": key, "into": target, "method": method, "commit": new}


def lane_tip(layout: Layout, lane: Lane, lock_fd: int, *, remote: bool = False) -> str:
    """The commit the lane's branch is at: the one place it is read, the branch brought
    from the origin first in remote mode (``fetch_lane``: fast-forward only)."""
    fetch_lane(layout, lane, remote=remote, lock_fd=lock_fd)
    return _rev(layout, f"refs/heads/{lane.branch}")


def _refuse_live(layout: Layout, lane: Lane) -> None:
    if not is_live(layout, lane):
        return
    runs = key_runs.newest(layout, lane.key, limit=1)
    run = runs[0] if runs else "RUN"
    raise AlreadyRunningError(
        f"lane {lane.key} has a live run ({run}); land it once it has ended "
        f"(flowdrop-tui stop {run})"
    )


def _refuse_live_target(layout: Layout, lane: Lane, target: str) -> None:
    """A target that is another lane's branch, its run live: landing would move the
    files under that run's feet."""
    for other in lanes(layout):
        if other.branch == target and other.key != lane.key and is_live(layout, other):
            runs = key_runs.newest(layout, other.key, limit=1)
            run = runs[0] if runs else "RUN"
            raise AlreadyRunningError(
                f"{target} is lane {other.key}'s branch and it has a live run ({run}); "
                f"land into it once that run has ended (flowdrop-tui stop {run})"
            )


def _refuse_dirty_lane(layout: Layout, lane: Lane, fd: int) -> None:
    """Every checkout of the lane's branch — its own worktree, or wherever a person
    checked the branch out — must be clean: land lands only what is committed."""
    trees = [lane.path] if (lane.path / ".git").exists() else []  # dropped: none
    ref = f"refs/heads/{lane.branch}"
    trees += [tree.path for tree in registered(layout, fd) if tree.branch == ref]
    seen: set[str] = set()
    for tree in trees:
        real = os.path.realpath(tree)
        if real in seen or not tree.is_dir():
            continue
        seen.add(real)
        changed = _status(tree, untracked=True, what=f"read lane {lane.key}'s changes")
        if not changed:
            continue
        if real == os.path.realpath(lane.path):
            raise DirtyTreeError(
                f"lane {lane.key}'s tree {lane.path} has uncommitted changes "
                f"({_listed(changed)}): land lands what its branch has committed — commit "
                f"them there, or keep them with flowdrop-tui lanes drop {lane.key} --archive"
            )
        raise DirtyTreeError(
            f"lane {lane.key}'s branch {lane.branch} is checked out in {tree} with "
            f"uncommitted changes ({_listed(changed)}): land lands what its branch has "
            "committed — commit them there or set them aside, then land again"
        )


def _refuse_dirty_target(checkout: Path, target: str) -> None:
    changed = _status(checkout, untracked=False, what=f"read the changes in {checkout}")
    if changed:
        raise DirtyTreeError(
            f"{target} is checked out in {checkout} with uncommitted changes "
            f"({_listed(changed)}): commit or set them aside there, then land again"
        )


def _made(layout: Layout, lane: Lane, target: str, old: str, tip: str, method: str, fd: int) -> str:
    """The landed commit, made without touching any checkout or ref."""
    tree = _merged_tree(layout, lane, target, old, tip, rebase=method == "rebase")
    if method == "rebase":
        new = _replayed(layout, lane, target, old, tip, fd)
    elif tree == _rev(layout, f"{old}^{{tree}}"):
        new = old  # its changes are all in the target already: nothing to squash or merge
    elif method == "squash":
        subjects = _git(
            layout, ["log", "--reverse", "--format=- %s", f"{old}..{tip}"], "list its commits"
        )
        message = f"Land lane {lane.key} ({lane.branch}) into {target}, squashed\n\n{subjects}\n"
        new = _commit(layout, tree, [old], message)
    else:
        message = f"Land lane {lane.key}: merge {lane.branch} into {target}\n"
        new = _commit(layout, tree, [old, tip], message)
    if new == old:
        raise RefusedError(
            f"lane {lane.key}'s changes are all in {target} already: nothing to land"
        )
    return new


def _merged_tree(
    layout: Layout, lane: Lane, target: str, old: str, tip: str, *, rebase: bool = False
) -> str:
    """The tree of the target and the lane merged; a conflict refused, naming its files
    (``merge-tree`` writes objects only: nothing anyone sees has changed)."""
    done = git_lock.run(
        None,
        ["merge-tree", "--write-tree", "--name-only", "--no-messages", old, tip],
        cwd=layout.workspace,
        what=f"merge lane {lane.key} with {target}",
        check=False,
    )
    lines = [line for line in done.stdout.splitlines() if line.strip()]
    if done.returncode == 1:
        _conflict(lane, target, list(dict.fromkeys(lines[1:])), rebase=rebase)
    if done.returncode != 0 or not lines:
        message = (done.stderr or done.stdout).strip() or "git merge-tree failed"
        raise GitError(f"could not merge lane {lane.key} with {target}: {message}")
    return lines[0]


def _replayed(layout: Layout, lane: Lane, target: str, old: str, tip: str, fd: int) -> str:
    """The lane's commits replayed onto ``old`` in a temporary detached worktree (the
    lane's branch names no commit there, so it never moves); the replay's last commit."""
    place = lanes_dir(layout) / ".landing" / f"{os.getpid()}-{uuid.uuid4().hex[:8]}"
    try:
        place.parent.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise GitError(
            f"could not make {place.parent} to replay lane {lane.key} in "
            f"({error.strerror or error}): make it a writable folder (or set [lanes] dir), "
            "then land again; nothing was changed"
        ) from None
    git_lock.run(
        fd,
        ["worktree", "add", "--detach", str(place), old],
        cwd=layout.workspace,
        what="make a temporary worktree to replay the lane in",
    )
    try:
        done = git_lock.run(
            fd,
            # a person's rebase.autoSquash or rebase.updateRefs would reorder the lane's
            # commits or move its branch (when no worktree has it): neither is asked here
            ["rebase", "--no-autosquash", "--no-update-refs", old, tip],
            cwd=place,
            what=f"replay lane {lane.key}'s commits onto {target}",
            check=False,
        )
        if done.returncode != 0:
            files = _git_in(place, ["diff", "--name-only", "--diff-filter=U"], "list conflicts")
            git_lock.run(fd, ["rebase", "--abort"], cwd=place, what="abort the replay", check=False)
            if files:
                _conflict(lane, target, files.splitlines(), rebase=True)
            message = (done.stderr or done.stdout).strip()
            raise GitError(f"could not replay lane {lane.key} onto {target}: {message}")
        return _git_in(place, ["rev-parse", "--verify", "HEAD"], "read the replayed commit")
    finally:
        git_lock.run(
            fd,
            ["worktree", "remove", "--force", "--force", str(place)],
            cwd=layout.workspace,
            what="remove the temporary worktree",
            check=False,
        )
        shutil.rmtree(place, ignore_errors=True)
        git_lock.run(  # its entry alone, if the first removal left it (never a global
            fd,  # prune: a person's worktree on a drive away for a moment is kept)
            ["worktree", "remove", "--force", str(place)],
            cwd=layout.workspace,
            what="forget the temporary worktree",
            check=False,
        )


def _refuse_in_the_way(layout: Layout, checkout: Path, target: str, old: str, new: str) -> None:
    """Every path the landing adds, and every folder above one, that is in the target's
    checkout but not in ``old``: an untracked or IGNORED file or folder a person has
    there (``merge --ff-only`` would overwrite an ignored one without a word)."""
    added = _git_in(
        layout.workspace,
        ["diff", "-z", "--name-only", "--no-renames", "--diff-filter=A", old, new],
        "list the files the landing adds",
        strip=False,
    ).split("\0")
    candidates: dict[str, None] = {}
    for path in filter(None, added):
        parts = path.split("/")
        for depth in range(1, len(parts) + 1):
            here = "/".join(parts[:depth])
            place = checkout / here
            last = depth == len(parts)
            if os.path.lexists(place) and (last or not place.is_dir() or place.is_symlink()):
                candidates[here] = None
    if not candidates:
        return
    tracked = set(
        _git_in(
            layout.workspace,
            ["ls-tree", "-z", "--name-only", old, "--", *candidates],
            "read the target's files",
            strip=False,
        ).split("\0")
    )
    blocking = [path for path in candidates if path not in tracked]
    if blocking:
        raise DirtyTreeError(
            f"{target} is checked out in {checkout}, where files the landing would "
            f"write are in the way, untracked or ignored ({_listed(blocking)}): move "
            "them away there, then land again"
        )


def fast_forward_checkout(checkout: Path, target: str, old: str, new: str, fd: int | None) -> None:
    """Move the checked-out target from ``old`` to ``new`` with its files — only while
    that checkout still has ``target`` checked out at ``old`` (a person may have switched
    it since it was read: what is checked out then is never moved). ``merge --ff-only``
    checks every file before it writes one: refused, it has changed nothing."""
    head = git_lock.run(
        fd, ["symbolic-ref", "-q", "HEAD"], cwd=checkout, what="read its branch", check=False
    ).stdout.strip()
    at = git_lock.run(
        fd, ["rev-parse", "--verify", "-q", "HEAD"], cwd=checkout, what="read it", check=False
    ).stdout.strip()
    if head != f"refs/heads/{target}" or at != old:
        raise RefusedError(
            f"{checkout} no longer has {target} checked out at {old[:12]} (it has "
            f"{head.removeprefix('refs/heads/') or 'a detached HEAD'} at {at[:12] or '?'}): "
            "nothing was changed; land again"
        )
    done = git_lock.run(
        fd,
        ["merge", "--ff-only", "--no-edit", new],
        cwd=checkout,
        what=f"bring {checkout} to the landed commit",
        check=False,
    )
    if done.returncode != 0:
        message = (done.stderr or done.stdout).strip()
        if "would be overwritten" in message:
            # git lists them indented by a tab, between its two lines of words
            files = [line.strip() for line in message.splitlines() if line.startswith("\t")]
            raise DirtyTreeError(
                f"{target} is checked out in {checkout}, where files the landing would "
                f"write are in the way ({_listed(files) or message}): move them away "
                "there, then land again"
            )
        raise GitError(f"could not bring {checkout} to the landed commit: {message}")


def _conflict(lane: Lane, target: str, files: list[str], *, rebase: bool = False) -> None:
    if rebase:  # the replay replays each commit: a merge into the lane would not help it
        how = (
            f"rebase it onto {target} in its tree (git -C {lane.path} rebase {target}), "
            "resolve, then land again — or land it with --merge"
        )
    else:
        how = f"merge {target} into {lane.branch} in {lane.path}, resolve, commit, land again"
    raise LandConflictError(
        f"lane {lane.key} conflicts with {target} in {_listed(files)}: nothing was changed ({how})"
    )


def _checked_out(layout: Layout, target: str, fd: int) -> Path | None:
    ref = f"refs/heads/{target}"
    for worktree in registered(layout, fd):
        if worktree.branch == ref and not worktree.prunable:
            return worktree.path
    return None


def _status(path: Path, *, untracked: bool, what: str) -> list[str]:
    args = ["status", "--porcelain", "--untracked-files=" + ("normal" if untracked else "no")]
    lines = _git_in(path, args, what, strip=False).splitlines()
    return [line[3:] for line in lines if line.strip()]


def _commit(layout: Layout, tree: str, parents: list[str], message: str) -> str:
    args = ["commit-tree", tree]
    for parent in parents:
        args += ["-p", parent]
    return _git(layout, [*args, "-m", message], "make the landed commit")


def _rev(layout: Layout, name: str) -> str:
    return _git(layout, ["rev-parse", "--verify", "--quiet", name], f"read {name}")


def _git(layout: Layout, args: list[str], what: str) -> str:
    return _git_in(layout.workspace, args, what)


def _git_in(cwd: Path, args: list[str], what: str, *, strip: bool = True) -> str:
    out = git_lock.run(None, args, cwd=cwd, what=what).stdout
    return out.strip() if strip else out


def _listed(names: list[str]) -> str:
    shown = ", ".join(names[:_SHOWN])
    return shown if len(names) <= _SHOWN else f"{shown} and {len(names) - _SHOWN} more"
