"""A worker's checkouts: a worktree per run from a mirror of the origin (docs/decisions.md,
"Runs on Temporal workers")."""

from __future__ import annotations

from pathlib import Path

import pytest

from flowdrop_tui.core import git as core_git
from flowdrop_tui.core.errors import InvalidNameError
from flowdrop_tui.core.git import run_ref
from flowdrop_tui.core.remote.daemon.worktrees import (
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
    assert git(origin, "rev-parse", run_ref(RUN)) == made
    source.release(tree)
    assert not tree.exists()
    assert str(tree) not in git(source.mirror, "worktree", "list")
    with pytest.raises(InvalidNameError):
        source.keep(clone, "../../heads/main")


def test_transcripts_made_in_a_worktree_are_kept_in_the_home_when_it_goes(
    tmp_path: Path,
) -> None:
    """Guards against a `command` session's transcript being deleted with the run's
    worktree (a reviewer found `show` linking to a file no disk held any more)."""
    origin, clone = make_origin(tmp_path)
    source = MirrorWorktrees(str(origin), tmp_path / "home")
    tree = source.checkout(git(clone, "rev-parse", "HEAD"), "run")
    made = tree / ".flowdrop" / "transcripts"
    made.mkdir(parents=True)
    (made / f"{RUN}-000001.log").write_text("what the command printed\n")
    (made / "elsewhere").symlink_to(tmp_path)  # a link is not a transcript flowdrop made
    source.release(tree)
    assert not tree.exists()
    kept = tmp_path / "home" / "transcripts" / f"{RUN}-000001.log"
    assert kept.read_text() == "what the command printed\n"
    assert not (tmp_path / "home" / "transcripts" / "elsewhere").exists()


def test_a_resumed_run_is_checked_out_at_its_own_ref_else_the_asked_commit(
    tmp_path: Path,
) -> None:
    """Guards against a resumed run losing what it committed before its pause (its
    worktree taken from the client's HEAD), and against a run that never pushed a ref
    failing to resume (it falls back to the asked commit, saying so: False)."""
    origin, clone = make_origin(tmp_path)
    head = git(clone, "rev-parse", "HEAD")
    source = MirrorWorktrees(str(origin), tmp_path / "home")
    tree = source.checkout(head, "first")
    (tree / "made.txt").write_text("by the run\n")
    made = commit_all(tree, "the run's commit", push=False)
    source.keep(tree, RUN)
    source.release(tree)
    again, kept = source.checkout_run(RUN, head, "again")
    assert kept is True and git(again, "rev-parse", "HEAD") == made
    assert (again / "made.txt").read_text() == "by the run\n"
    assert git(again, "rev-parse", "--abbrev-ref", "HEAD") == "HEAD"  # detached, no branch
    other = "20260817T014455.212Z-000000"
    fresh, kept = source.checkout_run(other, head, "fresh")
    assert kept is False and git(fresh, "rev-parse", "HEAD") == head
    with pytest.raises(InvalidNameError):
        source.checkout_run("../../heads/main", head, "bad")


def test_a_detached_head_records_the_branch_a_worker_was_given(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Guards against a run on a worker (a detached worktree) recording no branch, and
    against the worker's branch overriding one the checkout is really on."""
    origin, clone = make_origin(tmp_path)
    head = git(clone, "rev-parse", "HEAD")
    tree = MirrorWorktrees(str(origin), tmp_path / "home").checkout(head, "run")
    assert core_git.facts(tree) == {"head": head, "branch": None, "dirty": False}
    monkeypatch.setenv(core_git.BRANCH_ENV, "main")
    assert core_git.facts(tree) == {"head": head, "branch": "main", "dirty": False}
    git(tree, "checkout", "-q", "-b", "topic")  # the run checks out a branch: that one
    assert core_git.facts(tree) == {"head": head, "branch": "topic", "dirty": False}
    assert core_git.facts(clone) == {"head": head, "branch": "main", "dirty": False}


def test_a_worktree_left_by_a_dead_worker_is_replaced(tmp_path: Path) -> None:
    """Guards against a restarted worker failing every run whose folder a killed one left."""
    origin, clone = make_origin(tmp_path)
    head = git(clone, "rev-parse", "HEAD")
    source = MirrorWorktrees(str(origin), tmp_path / "home")
    tree = source.checkout(head, "run")
    (tree / "junk").write_text("left behind")
    again = MirrorWorktrees(str(origin), tmp_path / "home").checkout(head, "run")
    assert again == tree and not (tree / "junk").exists()


def test_a_restarted_worker_sweeps_what_a_dead_one_left(tmp_path: Path) -> None:
    """Guards against worktrees of runs whose worker died piling up in its home."""
    origin, clone = make_origin(tmp_path)
    head = git(clone, "rev-parse", "HEAD")
    source = MirrorWorktrees(str(origin), tmp_path / "home")
    tree = source.checkout(head, "left")
    assert sweep(tmp_path / "home") == [tree]
    assert not tree.exists() and str(tree) not in git(source.mirror, "worktree", "list")
    assert sweep(tmp_path / "nothing-here") == []


def test_a_parked_worktree_is_the_next_runs_at_its_commit_with_only_its_replica_kept(
    tmp_path: Path,
) -> None:
    """Guards against a warm worktree carrying the last run's files (untracked, ignored,
    edited) into the next run, or losing the replica it is kept for."""
    origin, clone = make_origin(tmp_path)
    (clone / "a.txt").write_text("one\n")
    first = commit_all(clone, "one")
    source = MirrorWorktrees(str(origin), tmp_path / "home")
    tree = source.checkout(first, "run-one", pool="space")
    (tree / "a.txt").write_text("edited by the run\n")
    (tree / "untracked.txt").write_text("made by the run\n")
    (tree / "build").mkdir()
    (tree / ".gitignore").write_text("build/\n")
    (tree / "build" / "ignored.o").write_text("x")
    replica = tree / ".flowdrop" / "cache" / "remote-replica.json"
    replica.parent.mkdir(parents=True)
    replica.write_text('{"last": 7}')
    (tree / ".flowdrop" / "given-snapshot.json").write_text("{}")
    source.park(tree, "space")
    assert not tree.exists()
    (clone / "a.txt").write_text("two\n")
    second = commit_all(clone, "two")
    other = source.checkout(first, "other-space", pool="elsewhere")  # another space: new
    assert not (other / ".flowdrop").exists()
    again = source.checkout(second, "run-two", pool="space")
    assert git(again, "rev-parse", "HEAD") == second
    assert (again / "a.txt").read_text() == "two\n"
    assert not (again / "untracked.txt").exists() and not (again / "build").exists()
    assert not (again / ".gitignore").exists()
    assert (again / ".flowdrop" / "cache" / "remote-replica.json").read_text() == '{"last": 7}'
    assert not (again / ".flowdrop" / "given-snapshot.json").exists()
    assert git(again, "status", "--porcelain", "--untracked-files=no") == ""
    fresh = source.checkout(second, "run-three", pool="space")  # none parked now: new
    assert not (fresh / ".flowdrop").exists()


def test_a_new_runs_commit_the_mirror_has_needs_no_fetch(tmp_path: Path) -> None:
    """Guards against every start asking the origin again (a round trip to a remote
    git server per start) for a commit the worker's mirror already holds; a commit it
    lacks is still fetched."""
    origin, clone = make_origin(tmp_path)
    head = git(clone, "rev-parse", "HEAD")
    source = MirrorWorktrees(str(origin), tmp_path / "home")
    source.release(source.checkout(head, "warm"))
    away = origin.rename(tmp_path / "origin-away.git")
    assert git(source.checkout(head, "run"), "rev-parse", "HEAD") == head  # no origin asked
    away.rename(origin)
    (clone / "c.txt").write_text("new\n")
    newer = commit_all(clone, "newer")
    assert git(source.checkout(newer, "newer"), "rev-parse", "HEAD") == newer


def test_a_restarted_worker_drops_the_parked_worktrees(tmp_path: Path) -> None:
    """Guards against a worker reusing, after a crash or a power cut, a replica whose
    unsynced writes may have been lost while its cursor says they were applied."""
    origin, clone = make_origin(tmp_path)
    head = git(clone, "rev-parse", "HEAD")
    source = MirrorWorktrees(str(origin), tmp_path / "home")
    source.park(source.checkout(head, "ended", pool="space"), "space")
    parked = source.parked / "space" / "ended"
    assert parked.is_dir()
    assert sweep(tmp_path / "home") == []  # parked, not left by a dead run: not counted
    assert not parked.exists() and str(parked) not in git(source.mirror, "worktree", "list")
    assert not (source.checkout(head, "next", pool="space") / ".flowdrop").exists()


def test_a_lane_is_checked_out_at_its_branch_else_its_run_s_ref_else_the_commit(
    tmp_path: Path,
) -> None:
    """Guards against a lane's run on a worker starting from the client's HEAD when its
    branch (or, before any round of it ended, its run's own ref) holds its commits, and
    against a lease on anything but what the origin's branch was."""
    origin, clone = make_origin(tmp_path)
    head = git(clone, "rev-parse", "HEAD")
    source = MirrorWorktrees(str(origin), tmp_path / "home")
    first, seen, kept = source.checkout_lane("flowdrop/flow/1", head, "first", run_id=RUN)
    assert (seen, kept) == (None, False) and git(first, "rev-parse", "HEAD") == head
    (first / "made.txt").write_text("by the run\n")
    made = commit_all(first, "the run's commit", push=False)
    source.keep(first, RUN)
    source.release(first)
    again, seen, kept = source.checkout_lane("flowdrop/flow/1", head, "again", run_id=RUN)
    assert (seen, kept) == (None, True) and git(again, "rev-parse", "HEAD") == made
    git(again, "push", "-q", str(origin), "HEAD:refs/heads/flowdrop/flow/1")
    source.release(again)
    tip, seen, kept = source.checkout_lane("flowdrop/flow/1", head, "tip")
    assert (seen, kept) == (made, True) and git(tip, "rev-parse", "HEAD") == made
    assert git(tip, "rev-parse", "--abbrev-ref", "HEAD") == "HEAD"  # detached, no branch
    with pytest.raises(InvalidNameError):
        source.checkout_lane("main", head, "bad")
