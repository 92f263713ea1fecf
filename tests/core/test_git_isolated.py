"""Git reads in a child process (for the UI) answer exactly as the in-process reads."""

from __future__ import annotations

import subprocess
from pathlib import Path

from flowdrop_tui.core import git, views
from flowdrop_tui.core.paths import Layout
from flowdrop_tui.core.records.run_record.run_info import RunInfo, Status


def commit(ws: Path, message: str) -> str:
    subprocess.run(
        ["git", "commit", "-q", "--allow-empty", "-m", message],
        cwd=ws,
        check=True,
        env={
            "GIT_AUTHOR_NAME": "t",
            "GIT_AUTHOR_EMAIL": "t@t",
            "GIT_COMMITTER_NAME": "t",
            "GIT_COMMITTER_EMAIL": "t@t",
            "PATH": "/usr/bin:/bin",
        },
    )
    return subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=ws, check=True, capture_output=True, text=True
    ).stdout.strip()


def test_isolated_reads_match_in_process_reads(workspace: Path, tmp_path: Path) -> None:
    """Guards the UI's git pane and workspace line against drifting from the CLI's."""
    start = git.head(workspace)
    commit(workspace, "first")
    commit(workspace, "second")
    assert git.isolated(workspace, "facts") == git.facts(workspace)
    ended = RunInfo(
        run="r",
        path=tmp_path,
        status=Status.COMPLETED,
        git_start={"head": start},
        git_end={"head": git.head(workspace)},
    )
    live = RunInfo(run="r", path=tmp_path, status=Status.RUNNING, git_start={"head": start})
    layout = Layout(workspace)
    for info in (ended, live):
        mine = views.git_of(layout, info, isolated=True)
        assert mine == views.git_of(layout, info)
        assert mine is not None
        assert [c["summary"] for c in mine["commits"]] == ["first", "second"]
    outside = tmp_path / "plain"
    outside.mkdir()
    assert git.isolated(outside, "facts") is None


def test_a_run_with_pushed_commits_is_measured_to_its_ref(workspace: Path, tmp_path: Path) -> None:
    """Guards ``show`` of a run on a remote worker: its commits are the ones its worker
    pushed to refs/flowdrop/runs/<run> (fetched here), not HEAD's; a local run without
    such a ref is still measured to HEAD."""
    start = git.head(workspace)
    assert start is not None
    run_id = "20261130T190000.000Z-abc123"
    subprocess.run(["git", "checkout", "-q", "-b", "worker"], cwd=workspace, check=True)
    commit(workspace, "on the worker")
    pushed = commit(workspace, "on the worker, again")
    subprocess.run(["git", "checkout", "-q", "main"], cwd=workspace, check=True)
    subprocess.run(
        ["git", "update-ref", f"{git.RUN_REFS}/{run_id}", pushed], cwd=workspace, check=True
    )
    subprocess.run(["git", "branch", "-q", "-D", "worker"], cwd=workspace, check=True)
    commit(workspace, "here, later")
    layout = Layout(workspace)
    for status in (Status.RUNNING, Status.PAUSED, Status.INTERRUPTED):
        info = RunInfo(run=run_id, path=tmp_path, status=status, git_start={"head": start})
        for isolated in (False, True):
            found = views.git_of(layout, info, isolated=isolated)
            assert found is not None
            summaries = [c["summary"] for c in found["commits"]]
            assert summaries == ["on the worker", "on the worker, again"], (status, isolated)
    local = RunInfo(
        run="20261130T190000.000Z-fff000",
        path=tmp_path,
        status=Status.RUNNING,
        git_start={"head": start},
    )
    for isolated in (False, True):
        found = views.git_of(layout, local, isolated=isolated)
        assert found is not None
        assert [c["summary"] for c in found["commits"]] == ["here, later"]
