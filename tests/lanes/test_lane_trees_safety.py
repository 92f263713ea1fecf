"""A lane's standing worktree is a person's as much as the run's: its run never removes
it to make it again (SPEC §23, "Cleanup never loses work") — only what git itself
marked as being made, or a registration whose folder is gone, and only its own."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.conftest import CLI
from tests.lanes.conftest import COUNTER, commit_flow, git, runs_of


def _failed_saying(cli: CLI, key: str, *words: str) -> None:
    done = cli("run", key, check=1)
    assert "Traceback" not in done.stderr, done.stderr
    for word in words:
        assert word in done.stderr, done.stderr
    assert runs_of(cli, key)[0]["status"] == "failed"


def test_a_detached_worktree_with_work_in_it_is_refused_never_made_again(
    workspace: Path, lanes_dir: Path, cli: CLI
) -> None:
    commit_flow(workspace, "count", COUNTER)
    cli("run", "count@1", check=0)
    tree = lanes_dir / "count" / "1"
    git(tree, "checkout", "-q", "--detach")
    (tree / "precious.txt").write_text("p\n")
    git(tree, "add", "precious.txt")
    git(tree, "commit", "-q", "-m", "precious")
    precious = git(tree, "rev-parse", "HEAD").strip()
    (tree / "notes.txt").write_text("uncommitted\n")
    _failed_saying(cli, "count@1", "detached HEAD", "git -C")
    assert (tree / "notes.txt").read_text() == "uncommitted\n"
    assert git(tree, "rev-parse", "HEAD").strip() == precious
    git(tree, "checkout", "-q", "flowdrop/count/1")  # as the message says: it runs again
    assert "rounds 4–6" in cli("run", "count@1", check=0).stderr
    assert (tree / "notes.txt").read_text() == "uncommitted\n"


def test_a_locked_worktree_and_one_whose_branch_was_deleted_are_left_as_they_are(
    workspace: Path, lanes_dir: Path, cli: CLI
) -> None:
    commit_flow(workspace, "count", COUNTER)
    cli("run", "count@1", check=0)
    cli("run", "count@2", check=0)
    one, two = lanes_dir / "count" / "1", lanes_dir / "count" / "2"
    git(workspace, "worktree", "lock", "--reason", "keep me", str(one))
    (one / "wip.txt").write_text("w\n")
    _failed_saying(cli, "count@1", "is locked (keep me)", "git worktree unlock")
    assert (one / "wip.txt").read_text() == "w\n"
    assert "locked" in git(workspace, "worktree", "list", "--porcelain")
    git(workspace, "update-ref", "-d", "refs/heads/flowdrop/count/2")
    (two / "wip.txt").write_text("w\n")
    _failed_saying(cli, "count@2", "has no commit", "--archive")
    assert (two / "wip.txt").read_text() == "w\n"


def test_a_persons_own_worktree_away_for_a_moment_stays_registered(
    workspace: Path, lanes_dir: Path, cli: CLI, tmp_path: Path
) -> None:
    commit_flow(workspace, "count", COUNTER)
    own, away = tmp_path / "mine", tmp_path / "mine-away"
    git(workspace, "worktree", "add", "-q", "--detach", str(own))
    (own / "mine.txt").write_text("m\n")
    git(own, "add", "mine.txt")
    git(own, "commit", "-q", "-m", "mine")
    own.rename(away)  # a drive unmounted while lanes are made
    cli("run", "count@1", check=0)
    away.rename(own)
    assert git(own, "log", "-1", "--format=%s").strip() == "mine"


def test_a_lane_whose_folder_was_deleted_by_hand_is_made_again(
    workspace: Path, lanes_dir: Path, cli: CLI
) -> None:
    commit_flow(workspace, "count", COUNTER)
    cli("run", "count@1", check=0)
    tree = lanes_dir / "count" / "1"
    import shutil

    shutil.rmtree(tree)
    assert "rounds 4–6" in cli("run", "count@1", check=0).stderr
    assert (tree / "rounds.txt").is_file()


def test_two_flows_never_share_a_worktree_or_a_branch(
    workspace: Path, lanes_dir: Path, cli: CLI
) -> None:
    commit_flow(workspace, "slow", COUNTER)
    commit_flow(workspace, "flows__slow", COUNTER)
    commit_flow(workspace, "a..b", COUNTER)
    cli("run", "flows/slow@1", check=0)
    cli("run", "flows__slow@1", check=0)
    cli("run", "a..b@1", check=0)
    paths = {
        os.path.realpath(line.split(" ", 1)[1])
        for line in git(workspace, "worktree", "list", "--porcelain").splitlines()
        if line.startswith("worktree ")
    }
    assert len(paths) == 4  # the workspace and three lanes, each its own
    branches = git(workspace, "for-each-ref", "--format=%(refname)", "refs/heads/flowdrop")
    assert len(branches.split()) == 3, branches


@pytest.mark.parametrize("data_home", ["relative/data", "INSIDE"])
def test_the_default_lanes_dir_is_absolute_and_outside_the_workspace(
    workspace: Path, cli: CLI, data_home: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    commit_flow(workspace, "count", COUNTER)
    inside = data_home == "INSIDE"
    monkeypatch.setenv("XDG_DATA_HOME", str(workspace / ".data") if inside else data_home)
    monkeypatch.setenv("HOME", str(workspace.parent / "home"))
    if inside:
        done = cli("run", "count@1", check=2)
        assert "inside the workspace" in done.stderr and "[lanes] dir" in done.stderr
        assert not (workspace / ".data").exists()
        return
    cli("run", "count@1", check=0)
    lane = cli.json("lanes", "--json")[0]
    assert os.path.isabs(lane["path"]) and lane["path"].startswith(str(workspace.parent / "home"))
