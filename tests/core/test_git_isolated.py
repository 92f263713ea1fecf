"""Git reads in a child process (for the UI) answer exactly as the in-process reads."""

from __future__ import annotations

import subprocess
from pathlib import Path

from flowdrop_tui.core import git, views
from flowdrop_tui.core.paths import Layout
from flowdrop_tui.core.records.events import RunInfo, Status


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
