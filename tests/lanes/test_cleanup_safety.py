"""Cleanup never loses work (SPEC §23) where a lane's worktree is not what its record
says: a HEAD moved off the lane's branch, another worktree at the lane's path, a
person's own worktree briefly missing, a branch checked out elsewhere, a broken tree."""

from __future__ import annotations

from pathlib import Path

import orjson

from flowdrop_tui.cli.laning import drop_text
from flowdrop_tui.core.lanes.cleanup import Facts, decide
from tests.conftest import CLI
from tests.lanes.lane_repo import git, lane_path, lanes_home, run_lane, seed

__all__ = ["lanes_home"]

BRANCH = "flowdrop/commits/1"


def landed_lane(ws: Path, cli: CLI) -> Path:
    seed(ws)
    run_lane(cli, "commits@1")
    git(ws, "merge", "-q", "--no-ff", "-m", "land", BRANCH)
    return lane_path(ws, "commits@1")


def detached_commit(tree: Path) -> str:
    git(tree, "checkout", "-q", "--detach")
    (tree / "d.txt").write_text("y\n")
    git(tree, "add", "d.txt")
    git(tree, "commit", "-q", "-m", "detached")
    return git(tree, "rev-parse", "HEAD")


def refusal(cli: CLI, *args: str) -> dict[str, str]:
    done = cli("lanes", "drop", *args, "--json", check=3)
    return orjson.loads(done.stdout)["error"]


def test_a_detached_heads_commits_are_never_dropped(
    workspace: Path, cli: CLI, lanes_home: Path
) -> None:
    """Guards a commit made on a detached HEAD in the lane's worktree: prune keeps the
    worktree, drop refuses naming it, --archive bundles it."""
    tree = landed_lane(workspace, cli)
    sha = detached_commit(tree)
    cli("prune", check=0)
    assert (tree / "d.txt").exists() and git(tree, "rev-parse", "HEAD") == sha
    error = refusal(cli, "commits@1")
    assert error["code"] == "UNMERGED_WORK"
    assert f"detached HEAD at {sha[:7]} with 1 commit(s) no branch has" in error["message"]
    done = cli.json("lanes", "drop", "commits@1", "--archive")
    bundle = done["archive"]["bundle"]
    tips = [line.split()[0] for line in git(workspace, "bundle", "list-heads", bundle).splitlines()]
    assert sha in tips and not tree.exists()


def test_a_rebase_in_progress_is_refused_even_with_archive(
    workspace: Path, cli: CLI, lanes_home: Path
) -> None:
    """Guards a rebase in progress in the lane's worktree: nothing bundles it; refused."""
    tree = landed_lane(workspace, cli)
    (Path(git(tree, "rev-parse", "--absolute-git-dir")) / "rebase-merge").mkdir()
    error = refusal(cli, "commits@1", "--archive")
    assert error["code"] == "UNMERGED_WORK" and "a rebase is in progress" in error["message"]
    assert tree.exists()


def test_another_worktree_at_the_lanes_path_is_never_removed(
    workspace: Path, cli: CLI, lanes_home: Path
) -> None:
    """Guards two lanes mapped to one path: the worktree found there on another branch
    is not the lane's, and stays."""
    tree = landed_lane(workspace, cli)
    git(workspace, "worktree", "remove", str(tree))
    git(workspace, "worktree", "add", "-q", "-b", "flowdrop/other/1", str(tree))
    error = refusal(cli, "commits@1")
    assert "flowdrop/other/1" in error["message"]
    cli("prune", check=0)
    assert (tree / ".git").exists()


def test_a_persons_missing_worktree_stays_registered(
    workspace: Path, cli: CLI, lanes_home: Path, tmp_path: Path
) -> None:
    """Guards a person's own worktree moved away (an unmounted drive) during a drop:
    its registration stays."""
    landed_lane(workspace, cli)
    own, away = tmp_path / "own", tmp_path / "away"
    git(workspace, "worktree", "add", "-q", "--detach", str(own))
    own.rename(away)
    cli("lanes", "drop", "commits@1", check=0)
    away.rename(own)
    assert str(own) in git(workspace, "worktree", "list")
    git(own, "status")


def test_a_branch_checked_out_elsewhere_is_kept_without_failing(
    workspace: Path, cli: CLI, lanes_home: Path
) -> None:
    """Guards a lane branch checked out in the main checkout: dry run and drop say it
    is kept and why; the drop does not fail."""
    tree = landed_lane(workspace, cli)
    git(workspace, "worktree", "remove", str(tree))
    git(workspace, "checkout", "-q", BRANCH)
    dry = cli.json("lanes", "drop", "commits@1", "--dry-run")
    assert dry["branch"]["done"] == "kept" and "checked out" in dry["branch"]["why"]
    done = cli.json("lanes", "drop", "commits@1")
    assert done["branch"]["done"] == "kept" and "checked out" in done["branch"]["why"]
    assert git(workspace, "branch", "--list", BRANCH)


def test_a_live_lane_names_its_run_to_stop() -> None:
    """Guards the live refusal's advice: `stop` takes the run's id."""
    made = decide("f@1", Facts(live=True, run="20260101-abc"))
    assert "flowdrop-tui stop 20260101-abc" in str(made.refused)


def test_a_kept_branch_is_said_once() -> None:
    """Guards the drop text's wording: 'kept (3 commit(s) …)', not 'kept (kept: …)'."""
    made = decide("f@1", Facts(exists=True, branch=True, unmerged=3, unsaved=0, base="main"))
    text = drop_text(
        {
            "key": "f@1",
            "dry_run": False,
            "archive": None,
            "worktree": {"path": "/x", "done": "removed", "why": made.why["worktree"]},
            "branch": {"name": "b", "done": "kept", "why": made.why["branch"]},
        }
    )
    assert "kept (3 commit(s) not merged into main" in text


def test_another_lanes_live_run_in_the_worktree_is_refused() -> None:
    """Guards two lanes at one path: a live run of the other one keeps the worktree."""
    made = decide("f@1", Facts(exists=True, branch=True, other_live="f@2"))
    assert made.refused is not None and "f@2" in str(made.refused)
    assert not (made.remove_tree or made.delete_branch)
