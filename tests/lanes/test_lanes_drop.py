"""``lanes drop`` (SPEC §23, "Cleanup never loses work"): a lane's worktree goes only
when nothing of it would be lost, or once ``--archive`` saved it, checked."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import orjson

from flowdrop_tui.core.lanes import lane_log
from flowdrop_tui.core.paths import Layout
from tests.conftest import CLI, write_flow
from tests.lanes.lane_repo import git, lane_path, lanes_home, run_lane, seed
from tests.waiting import wait_for

__all__ = ["lanes_home"]


def state(ws: Path) -> tuple[str, str, str]:
    """Branches, worktrees and the lane logs as they are: what a refusal must not move."""
    logs = ws / ".flowdrop" / "lanes"
    listed = sorted(str(p.relative_to(logs)) for p in logs.rglob("*")) if logs.exists() else []
    return git(ws, "branch", "-av"), git(ws, "worktree", "list"), "\n".join(listed)


def refused(cli: CLI, *args: str) -> dict[str, str]:
    done = cli("lanes", "drop", *args, "--json", check=3)
    return orjson.loads(done.stdout)["error"]


def test_a_merged_clean_lane_goes_with_its_branch(
    workspace: Path, cli: CLI, lanes_home: Path
) -> None:
    """Guards the plain case: merged and clean → worktree and branch removed, logged."""
    seed(workspace)
    run_lane(cli, "commits@1")
    git(workspace, "merge", "-q", "--no-ff", "-m", "land", "flowdrop/commits/1")
    path = lane_path(workspace, "commits@1")
    done = cli.json("lanes", "drop", "commits@1")
    assert done["worktree"]["done"] == "removed" and done["branch"]["done"] == "deleted"
    assert not path.exists() and not git(workspace, "branch", "--list", "flowdrop/commits/1")
    assert lane_log.last(Layout(workspace), "commits@1", "lane_dropped") is not None
    row = cli.json("lanes")[0]
    assert row["dropped"] is True and row["exists"] is False


def test_unmerged_and_dirty_are_refused_changing_nothing(
    workspace: Path, cli: CLI, lanes_home: Path
) -> None:
    """Guards the refusal: unmerged commits (UNMERGED_WORK) and a dirty tree
    (DIRTY_TREE), each named, and nothing moved — a dry run neither."""
    seed(workspace)
    run_lane(cli, "commits@1")
    run_lane(cli, "leaves@1")
    before = state(workspace)
    error = refused(cli, "commits@1")
    assert (
        error["code"] == "UNMERGED_WORK" and "1 commit(s) not merged into main" in error["message"]
    )
    error = refused(cli, "leaves@1")
    assert error["code"] == "DIRTY_TREE"
    assert "README" in error["message"] and "blob.bin" in error["message"]
    assert refused(cli, "leaves@1", "--dry-run")["code"] == "DIRTY_TREE"
    assert state(workspace) == before


def test_archive_saves_commits_and_changes_first(
    workspace: Path, cli: CLI, lanes_home: Path, tmp_path: Path
) -> None:
    """Guards --archive: the bundle verifies, the patch (binary and untracked files too)
    applies onto the lane's HEAD in a fresh worktree, then the worktree goes; the
    branch stays without --delete-branch."""
    seed(workspace)
    write_flow(
        workspace,
        "both",
        """
        import subprocess
        from flowdrop_tui import flow

        @flow()
        def main(run):
            for _ in run.rounds([1]):
                with open("kept.txt", "w") as out:
                    out.write("committed")
                subprocess.run(["git", "add", "kept.txt"], check=True)
                subprocess.run(["git", "commit", "-q", "-m", "kept"], check=True)
                with open("README", "a") as out:
                    out.write("left\\n")
                with open("blob.bin", "wb") as out:
                    out.write(bytes(range(256)) * 4)
        """,
    )
    run_lane(cli, "both@1")
    path = lane_path(workspace, "both@1")
    head = git(path, "rev-parse", "HEAD")
    done = cli.json("lanes", "drop", "both@1", "--archive")
    archive = done["archive"]
    assert done["worktree"]["done"] == "removed" and not path.exists()
    assert (
        done["branch"]["done"] == "kept" and git(workspace, "rev-parse", "flowdrop/both/1") == head
    )
    logged = lane_log.last(Layout(workspace), "both@1", "lane_archived")
    assert logged is not None and logged["bundle"] == archive["bundle"]
    assert logged["patch"] == archive["patch"] and logged["head"] == head
    git(workspace, "bundle", "verify", archive["bundle"])
    fresh = tmp_path / "fresh"
    git(workspace, "worktree", "add", "-q", "--detach", str(fresh), head)
    git(fresh, "apply", "--check", archive["patch"])
    git(fresh, "apply", archive["patch"])
    assert (fresh / "blob.bin").read_bytes() == bytes(range(256)) * 4
    assert (fresh / "README").read_text().endswith("left\n")


def test_delete_branch_only_once_archived(workspace: Path, cli: CLI, lanes_home: Path) -> None:
    """Guards --delete-branch: refused while commits are unsaved, done once archived
    (the bundle holds the branch's commit)."""
    seed(workspace)
    run_lane(cli, "commits@1")
    head = git(workspace, "rev-parse", "flowdrop/commits/1")
    assert refused(cli, "commits@1", "--delete-branch")["code"] == "UNMERGED_WORK"
    done = cli.json("lanes", "drop", "commits@1", "--archive", "--delete-branch")
    assert done["branch"]["done"] == "deleted"
    listed = git(workspace, "bundle", "list-heads", done["archive"]["bundle"])
    assert head in listed


def test_dry_run_changes_nothing(workspace: Path, cli: CLI, lanes_home: Path) -> None:
    """Guards --dry-run: what would go and why, and nothing moved."""
    seed(workspace)
    run_lane(cli, "commits@1")
    before = state(workspace)
    done = cli.json("lanes", "drop", "commits@1", "--archive", "--dry-run")
    assert done["dry_run"] and done["worktree"]["done"] == "removed"
    assert done["archive"] == {"commits": 1, "files": []}
    assert state(workspace) == before
    said = cli("lanes", "drop", "commits@1", "--archive", "--dry-run", check=0).stdout
    assert "would be removed" in said and "nothing changed" in said


def test_a_live_lane_is_refused(workspace: Path, cli: CLI, lanes_home: Path) -> None:
    """Guards ALREADY_RUNNING: a lane whose run is live keeps its worktree."""
    seed(workspace)
    write_flow(
        workspace,
        "waits",
        """
        import os, time
        from flowdrop_tui import flow

        @flow()
        def main(run):
            for _ in run.rounds([1]):
                while not os.path.exists(os.environ["GO"]):
                    time.sleep(0.02)
        """,
    )
    go = workspace / ".flowdrop-go"
    started = subprocess.Popen(
        [sys.executable, "-m", "flowdrop_tui", "run", "waits@1", "--detach"],
        cwd=workspace,
        env={**os.environ, "GO": str(go)},
        stdout=subprocess.PIPE,
        text=True,
    )
    started.communicate(timeout=60)
    wait_for(lambda: any(r["status"] == "running" for r in cli.json("lanes", "waits")))
    assert refused(cli, "waits@1", "--archive")["code"] == "ALREADY_RUNNING"
    assert lane_path(workspace, "waits@1").exists()
    go.write_text("")
    wait_for(lambda: cli.json("lanes", "waits")[0]["status"] == "completed")
    assert cli.json("lanes", "drop", "waits@1")["worktree"]["done"] == "removed"
