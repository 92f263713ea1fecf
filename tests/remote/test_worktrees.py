"""A worker's checkouts: a worktree per run from a mirror of the origin (issue 17)."""

from __future__ import annotations

from pathlib import Path

import pytest

from flowdrop_tui.core.errors import InvalidNameError
from flowdrop_tui.core.remote.worktrees import (
    RUN_REFS,
    LocalWorkspace,
    MirrorWorktrees,
    NotOnOriginError,
    sweep,
)
from tests.remote.git_origin import commit_all, git, make_origin

RUN = "20260817T014455.212Z-9f21ab"


def test_a_run_gets_a_detached_worktree_of_the_asked_commit(tmp_path: Path) -> None:
    """Guards against a run working on the mirror's default branch instead of the
    commit the client asked for, or two runs sharing one checkout."""
    origin, clone = make_origin(tmp_path)
    (clone / "a.txt").write_text("one\n")
    first = commit_all(clone, "one")
    (clone / "a.txt").write_text("two\n")
    commit_all(clone, "two")
    source = MirrorWorktrees(str(origin), tmp_path / "home")
    one = source.checkout(first, "run-one")
    other = source.checkout(first, "run-two")
    assert (one / "a.txt").read_text() == "one\n"
    assert git(one, "rev-parse", "HEAD") == first
    assert git(one, "rev-parse", "--abbrev-ref", "HEAD") == "HEAD"  # detached
    assert one != other and (other / "a.txt").exists()


def test_a_commit_not_on_the_origin_is_refused_naming_it(tmp_path: Path) -> None:
    """Guards against a worker silently running some other commit when the client
    forgot to push (or naming garbage as a commit)."""
    origin, clone = make_origin(tmp_path)
    (clone / "b.txt").write_text("local only\n")
    local = commit_all(clone, "not pushed", push=False)
    source = MirrorWorktrees(str(origin), tmp_path / "home")
    with pytest.raises(NotOnOriginError) as refused:
        source.checkout(local, "run")
    assert local in refused.value.message and "push" in refused.value.message
    assert refused.value.code == "NOT_ON_ORIGIN" and refused.value.exit_code == 3
    with pytest.raises(NotOnOriginError):
        source.checkout("--upload-pack=evil", "run")
    assert not (tmp_path / "home" / "worktrees" / "run").exists()


def test_a_runs_commits_are_pushed_to_its_ref_then_the_worktree_goes(tmp_path: Path) -> None:
    """Guards against a run's commits dying with the worker's worktree: they are on
    the origin under refs/flowdrop/runs/<run> before the worktree is removed."""
    origin, clone = make_origin(tmp_path)
    head = git(clone, "rev-parse", "HEAD")
    source = MirrorWorktrees(str(origin), tmp_path / "home")
    tree = source.checkout(head, "run")
    (tree / "made.txt").write_text("by the run\n")
    made = commit_all(tree, "the run's commit", push=False)
    assert source.keep(tree, RUN) is True
    assert source.keep(tree, RUN) is False  # nothing new: no second push
    assert git(origin, "rev-parse", RUN_REFS + RUN) == made
    source.release(tree)
    assert not tree.exists()
    assert str(tree) not in git(source.mirror, "worktree", "list")
    with pytest.raises(InvalidNameError):
        source.keep(clone, "../../heads/main")


def test_a_worktree_left_by_a_dead_worker_is_replaced(tmp_path: Path) -> None:
    """Guards against a restarted worker failing every run whose folder a killed one left."""
    origin, clone = make_origin(tmp_path)
    head = git(clone, "rev-parse", "HEAD")
    source = MirrorWorktrees(str(origin), tmp_path / "home")
    tree = source.checkout(head, "run")
    (tree / "junk").write_text("left behind")
    again = MirrorWorktrees(str(origin), tmp_path / "home").checkout(head, "run")
    assert again == tree and not (tree / "junk").exists()


def test_local_mode_runs_in_the_workspace_itself(tmp_path: Path) -> None:
    source = LocalWorkspace(tmp_path)
    assert source.checkout("anything", "run") == tmp_path
    assert source.keep(tmp_path, RUN) is False
    source.release(tmp_path)
    assert tmp_path.exists()


def test_a_restarted_worker_sweeps_what_a_dead_one_left(tmp_path: Path) -> None:
    """Guards against worktrees of runs whose worker died piling up in its home."""
    origin, clone = make_origin(tmp_path)
    head = git(clone, "rev-parse", "HEAD")
    source = MirrorWorktrees(str(origin), tmp_path / "home")
    tree = source.checkout(head, "left")
    assert sweep(tmp_path / "home") == [tree]
    assert not tree.exists() and str(tree) not in git(source.mirror, "worktree", "list")
    assert sweep(tmp_path / "nothing-here") == []
