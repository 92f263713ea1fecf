"""SPEC §23's promise, "cleanup never loses work", over lane histories hypothesis draws:
commits merged or not, pushed to a bare remote or not, a dirty tree (tracked, deleted,
staged, untracked, binary), a worktree standing (on its branch, or on a detached HEAD
with or without commits of its own), gone, or half made by a kill, landed or not — then
``lanes drop`` (with and without ``--archive``/``--delete-branch``) or prune's part.
After it, every commit only the lane's branch or its worktree's HEAD reached is still
reached by some ref, by the standing worktree's HEAD, or is in an archived bundle, and
every uncommitted change is still in the tree
or in an archived patch; a refusal changes nothing.

One real lane run writes the record once; each example then rebuilds the lane's git
history directly under that record (a lane is found by its record: ``known.lane_of``)."""

from __future__ import annotations

import contextlib
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from flowdrop_tui.core.errors import FlowdropError
from flowdrop_tui.core.lanes import cleanup, lane_log
from flowdrop_tui.core.lanes.known import lane_of
from flowdrop_tui.core.paths import Layout
from tests.conftest import CLI
from tests.lanes.lane_repo import git, lanes_home, run_lane, seed

__all__ = ["lanes_home"]

KEY = "idle@1"
BRANCH = "flowdrop/idle/1"
DIRT = ("modified", "deleted", "staged", "untracked", "binary")
HEADS = ("branch", "branch", "detached", "detached+commit")


@dataclass(frozen=True)
class History:
    commits: int  # the lane's own commits
    merged: int  # how many of them main has merged
    pushed: int  # how many of them the bare remote has
    main_moves: bool  # main gained a commit of its own after the lane began
    tree: str  # "standing", "gone" (the branch alone), "half" (a kill during its making)
    dirt: frozenset[str]  # uncommitted changes (a standing tree only)
    landed: bool  # a `landed` event in the lane's log
    action: str  # "drop" or "prune"
    archive: bool
    delete_branch: bool
    head: str = "branch"  # a standing tree's HEAD: "branch", "detached", "detached+commit"


@st.composite
def histories(draw: st.DrawFn) -> History:
    commits = draw(st.integers(0, 3))
    tree = draw(st.sampled_from(["standing", "standing", "gone", "half"]))
    return History(
        commits=commits,
        merged=draw(st.integers(0, commits)),
        pushed=draw(st.integers(0, commits)),
        main_moves=draw(st.booleans()),
        tree=tree,
        dirt=draw(st.frozensets(st.sampled_from(DIRT))) if tree == "standing" else frozenset(),
        landed=draw(st.booleans()),
        action=draw(st.sampled_from(["drop", "drop", "prune"])),
        archive=draw(st.booleans()),
        delete_branch=draw(st.booleans()),
        head=draw(st.sampled_from(HEADS)) if tree == "standing" else "branch",
    )


class Bench:
    """The one workspace every example rebuilds its lane's history in."""

    def __init__(self, ws: Path, remote: Path) -> None:
        self.ws, self.remote = ws, remote
        self.layout = Layout(ws)
        lane = lane_of(self.layout, KEY)
        assert lane is not None and lane.base is not None
        self.path, self.base = lane.path, lane.base

    def reset(self) -> None:
        ws = self.ws
        with contextlib.suppress(AssertionError):
            git(ws, "worktree", "remove", "--force", "--force", str(self.path))
        shutil.rmtree(self.path, ignore_errors=True)
        git(ws, "worktree", "prune")
        git(ws, "reset", "-q", "--hard", self.base)
        git(ws, "branch", "-D", BRANCH, check=False)
        git(ws, "update-ref", "-d", f"refs/remotes/origin/{BRANCH}")
        git(self.remote, "update-ref", "-d", f"refs/heads/{BRANCH}")
        shutil.rmtree(ws / ".flowdrop" / "lanes", ignore_errors=True)

    def build(self, h: History) -> None:
        ws, path = self.ws, self.path
        git(ws, "worktree", "add", "-q", "-b", BRANCH, str(path), self.base)
        made = []
        for n in range(h.commits):
            (path / f"lane{n}.txt").write_text(f"lane commit {n}\n")
            git(path, "add", f"lane{n}.txt")
            git(path, "commit", "-q", "-m", f"lane {n}")
            made.append(git(path, "rev-parse", "HEAD"))
        if h.merged:
            git(ws, "merge", "-q", "--no-ff", "-m", "merge", made[h.merged - 1])
        if h.pushed:
            git(ws, "push", "-q", "origin", f"{made[h.pushed - 1]}:refs/heads/{BRANCH}")
        if h.main_moves:
            git(ws, "commit", "-q", "--allow-empty", "-m", "main moves on")
        if h.tree != "standing":
            git(ws, "worktree", "remove", "--force", str(path))
        elif h.head != "branch":  # a person's own work on a detached HEAD, no branch has it
            git(path, "checkout", "-q", "--detach")
            if h.head == "detached+commit":
                (path / "head.txt").write_text("on a detached HEAD\n")
                git(path, "add", "head.txt")
                git(path, "commit", "-q", "-m", "detached")
        if h.tree == "half":  # registered, locked as `worktree add` does, nothing checked out
            git(ws, "worktree", "add", "-q", "--no-checkout", str(path), BRANCH)
            git(ws, "worktree", "lock", "--reason", "initializing", str(path))
        for kind in h.dirt:
            if kind == "modified":
                (path / "README").write_text("hello\nchanged\n")
            elif kind == "deleted":
                (path / ".gitignore").unlink()
            elif kind == "staged":
                (path / "staged.txt").write_text("staged\n")
                git(path, "add", "staged.txt")
            elif kind == "untracked":
                (path / "notes" / "new.txt").parent.mkdir(exist_ok=True)
                (path / "notes" / "new.txt").write_text("untracked\n")
            else:
                (path / "blob.bin").write_bytes(bytes(range(256)) * 3)
        if h.landed:
            lane_log.append(self.layout, KEY, "landed", into="main", method="merge", commit="x")

    def only_the_lanes(self) -> set[str]:
        """Commits the lane's branch or its worktree's HEAD reaches and no other ref does
        (a worktree's HEAD is not a ref: the lane's own worktree would hide them all)."""
        others = [ref for ref in self.refs() if ref != f"refs/heads/{BRANCH}"]
        tips = [f"refs/heads/{BRANCH}"]
        if (self.path / ".git").exists() and not self.half():
            tips.append(git(self.path, "rev-parse", "HEAD"))
        found = git(self.ws, "rev-list", *tips, "--not", *others, check=False)
        return set(found.split())

    def refs(self) -> list[str]:
        return git(self.ws, "for-each-ref", "--format=%(refname)").split()

    def reachable(self) -> set[str]:
        refs = git(self.ws, "for-each-ref", "--format=%(objectname)").split()
        return set(git(self.ws, "rev-list", *refs).split()) if refs else set()

    def in_tree(self) -> set[str]:
        """Commits the lane's worktree's HEAD reaches while the worktree stands."""
        if not (self.path / ".git").exists() or self.half():
            return set()
        return set(git(self.path, "rev-list", "HEAD").split())

    def changes(self) -> dict[str, bytes | None]:
        """The tree's uncommitted files: path → content (``None``: deleted)."""
        if not (self.path / ".git").exists() or self.half():
            return {}
        names = cleanup.changed_files(self.path)
        found: dict[str, bytes | None] = {}
        for name in names:
            for file in [name] if not name.endswith("/") else []:
                where = self.path / file
                found[file] = where.read_bytes() if where.exists() else None
        return found

    def half(self) -> bool:
        return "initializing" in git(self.ws, "worktree", "list", "--porcelain")

    def bundled(self) -> set[str]:
        commits: set[str] = set()
        for event in lane_log.events(self.layout, KEY):
            if event.get("event") == "lane_archived" and event.get("bundle"):
                git(self.ws, "bundle", "verify", event["bundle"])
                tips = [
                    line.split()[0]
                    for line in git(self.ws, "bundle", "list-heads", event["bundle"]).splitlines()
                ]
                commits |= set(git(self.ws, "rev-list", *tips, f"^{self.base}").split())
        return commits

    def patched(self, scratch: Path) -> dict[str, bytes | None]:
        """The files the archived patch gives back, applied onto the lane's HEAD."""
        event = lane_log.last(self.layout, KEY, "lane_archived")
        if event is None or not event.get("patch"):
            return {}
        shutil.rmtree(scratch, ignore_errors=True)
        git(self.ws, "worktree", "add", "-q", "--detach", str(scratch), event["head"])
        try:
            git(scratch, "apply", event["patch"])
            return {
                name: (scratch / name).read_bytes() if (scratch / name).exists() else None
                for name in event.get("files") or []
            }
        finally:
            git(self.ws, "worktree", "remove", "--force", str(scratch))


def act(bench: Bench, h: History) -> Any:
    if h.action == "prune":
        return cleanup.prune_lanes(bench.layout)
    try:
        return cleanup.drop(bench.layout, KEY, archive=h.archive, delete_branch=h.delete_branch)
    except FlowdropError as exc:
        return exc


def test_cleanup_never_loses_work(
    workspace: Path, cli: CLI, lanes_home: Path, tmp_path: Path
) -> None:
    """Guards "cleanup never loses work" (SPEC §23) against any history drawn, and a
    refusal's "nothing changed"."""
    seed(workspace)
    run_lane(cli, KEY)  # the record every example's lane is found by
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(remote))
    git(workspace, "remote", "add", "origin", str(remote))
    bench = Bench(workspace, remote)

    @settings(
        max_examples=60,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    @given(histories())
    # the histories where a careless cleanup loses work, always tried
    @example(History(2, 0, 1, False, "gone", frozenset(), False, "drop", False, True))
    @example(History(1, 0, 0, True, "standing", frozenset(DIRT), False, "drop", True, True))
    @example(
        History(2, 1, 0, False, "standing", frozenset({"binary"}), True, "prune", False, False)
    )
    @example(History(1, 0, 0, False, "half", frozenset(), False, "drop", False, True))
    @example(History(1, 0, 0, False, "standing", frozenset(DIRT), False, "drop", False, False))
    # a detached HEAD's commit in a landed, merged lane: prune and drop must keep it
    @example(
        History(
            1, 1, 0, False, "standing", frozenset(), True, "prune", False, False, "detached+commit"
        )
    )
    @example(
        History(
            1, 1, 0, False, "standing", frozenset(), True, "drop", True, True, "detached+commit"
        )
    )
    def check(h: History) -> None:
        bench.reset()
        bench.build(h)
        lanes_own = bench.only_the_lanes()
        changes = bench.changes()
        tip = git(workspace, "rev-parse", f"refs/heads/{BRANCH}")
        standing = (bench.path / ".git").exists()
        done = act(bench, h)
        if isinstance(done, FlowdropError):
            assert git(workspace, "rev-parse", f"refs/heads/{BRANCH}") == tip
            assert (bench.path / ".git").exists() == standing
            assert bench.changes() == changes
            return
        lost = lanes_own - bench.reachable() - bench.in_tree() - bench.bundled()
        assert not lost, (h, done, lost)
        if (bench.path / ".git").exists():
            assert bench.changes() == changes, (h, done)
        elif changes:
            assert bench.patched(tmp_path / "scratch") == changes, (h, done)

    check()
