"""``fetch_lane`` (SPEC §23, remote mode): ``land`` in a client's checkout first brings
the lane's branch a worker pushed to the origin — fast-forward only, that branch
alone, and nothing at all locally or where there is nothing to fetch."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from flowdrop_tui.core.errors import GitError
from flowdrop_tui.core.lanes.fetching import fetch_lane
from flowdrop_tui.core.lanes.place import Lane
from flowdrop_tui.core.paths import Layout

ENV = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t"}
ENV |= {"GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
BRANCH = "flowdrop/flow/1"


def git(cwd: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", *args], cwd=cwd, env={**os.environ, **ENV}, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def lane(name: str = "1") -> Lane:
    return Lane(
        key=f"flow@{name}",
        flow_key="flow",
        name=name,
        branch=f"flowdrop/flow/{name}",
        path=Path("/nowhere/flow") / name,
        base=None,
        base_branch="main",
    )


@pytest.fixture
def origin(tmp_path: Path) -> tuple[Path, Path, Path]:
    """An origin, a client clone, and a worker's clone that pushed lane 1's branch."""
    bare = tmp_path / "origin.git"
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(bare))
    client = tmp_path / "client"
    git(tmp_path, "clone", "-q", str(bare), str(client))
    git(client, "commit", "-q", "--allow-empty", "-m", "init")
    git(client, "push", "-q", "origin", "HEAD:main")
    worker = tmp_path / "worker"
    git(tmp_path, "clone", "-q", str(bare), str(worker))
    git(worker, "commit", "-q", "--allow-empty", "-m", "round 1")
    git(worker, "push", "-q", "origin", f"HEAD:refs/heads/{BRANCH}")
    return bare, client, worker


def test_fetches_the_lane_branch_and_fast_forwards_it(origin: tuple[Path, Path, Path]) -> None:
    _, client, worker = origin
    layout = Layout(client)
    assert fetch_lane(layout, lane(), remote=True) == git(worker, "rev-parse", "HEAD")
    git(worker, "commit", "-q", "--allow-empty", "-m", "round 2")
    git(worker, "push", "-q", "origin", f"HEAD:refs/heads/{BRANCH}")
    assert fetch_lane(layout, lane(), remote=True) == git(worker, "rev-parse", "HEAD")
    assert git(client, "log", "--format=%s", BRANCH).splitlines() == ["round 2", "round 1", "init"]
    assert git(client, "log", "-1", "--format=%s", "main") == "init"  # the rest as it was


def test_nothing_locally_without_origin_or_without_the_branch(
    origin: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    """Guards against a local-mode ``land`` reaching for the network, and against a
    lane no round of which has ended yet (nothing pushed) failing the land."""
    _, client, _ = origin
    layout = Layout(client)
    assert fetch_lane(layout, lane(), remote=False) is None
    assert git(client, "branch", "--list", BRANCH) == ""
    assert fetch_lane(layout, lane("2"), remote=True) is None
    alone = tmp_path / "alone"
    git(tmp_path, "init", "-q", "-b", "main", str(alone))
    assert fetch_lane(Layout(alone), lane(), remote=True) is None


def test_a_local_branch_with_commits_of_its_own_is_never_overwritten(
    origin: tuple[Path, Path, Path],
) -> None:
    _, client, worker = origin
    layout = Layout(client)
    fetch_lane(layout, lane(), remote=True)
    git(client, "checkout", "-q", BRANCH)
    git(client, "commit", "-q", "--allow-empty", "-m", "mine")
    git(client, "checkout", "-q", "main")
    git(worker, "commit", "-q", "--allow-empty", "-m", "round 2")
    git(worker, "push", "-q", "origin", f"HEAD:refs/heads/{BRANCH}")
    with pytest.raises(GitError, match="fast-forward only"):
        fetch_lane(layout, lane(), remote=True)
    assert git(client, "log", "-1", "--format=%s", BRANCH) == "mine"
