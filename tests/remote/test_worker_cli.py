"""`flowdrop-tui worker`'s bad inputs: named, exit 2, no traceback."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest


def worker(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLOWDROP_")}
    return subprocess.run(
        [sys.executable, "-m", "flowdrop_tui", "--workspace", str(tmp_path), "worker", *args],
        capture_output=True,
        text=True,
        env={**env, "HOME": str(tmp_path)},
        timeout=60,
    )


@pytest.mark.parametrize(
    ("args", "said"),
    [
        ([], "--temporal"),
        (["--temporal", "127.0.0.1:1"], "--postgres"),
        (["--temporal", "a:1", "--postgres", "postgresql://x@h/db", "--id", "a/b"], "worker id"),
        (["--temporal", "a:1", "--postgres", "postgresql://x@h/db", "--id", ""], "worker id"),
        (["--max-runs", "0"], "number of runs"),
        (["--temporal", "grpc://a:1", "--postgres", "postgresql://x@h/db"], "(--temporal)"),
        (["--temporal", "a:1", "--postgres", "h:5432"], "(--postgres)"),
    ],
)
def test_a_worker_without_what_it_needs_is_refused_naming_it(
    tmp_path: Path, args: list[str], said: str
) -> None:
    """Guards against a worker that starts half configured (or with an id that cannot
    name a task queue) and fails later, or fails with a traceback."""
    done = worker(tmp_path, *args)
    assert done.returncode == 2, done.stderr
    assert said in done.stderr and "Traceback" not in done.stderr


def test_a_worker_whose_temporal_server_is_not_there_says_so(tmp_path: Path) -> None:
    """Guards against a worker hanging or printing a traceback when Temporal is down."""
    done = worker(
        tmp_path, "--temporal", "127.0.0.1:9", "--postgres", "postgresql://x@127.0.0.1:9/p"
    )
    assert done.returncode == 4 and "Traceback" not in done.stderr  # TEMPORAL_UNREACHABLE
    assert "cannot reach the Temporal server at 127.0.0.1:9: connection refused" in done.stderr


def test_two_workers_never_share_a_home(tmp_path: Path) -> None:
    """Guards against a second worker sweeping (or mixing up) the first one's worktrees."""
    from flowdrop_tui.core.remote.worker import hold_home

    home = tmp_path / "home"
    home.mkdir()
    hold_home(home, "first")
    done = worker(
        tmp_path,
        "--home",
        str(home),
        "--temporal",
        "127.0.0.1:9",
        "--postgres",
        "postgresql://x@127.0.0.1:9/p",
    )
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert f"uses the home {home}" in done.stderr and str(os.getpid()) in done.stderr
