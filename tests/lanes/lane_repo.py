"""Lanes made by really running them (SPEC §23): a workspace whose lanes' worktrees go
to a data home in ``tmp_path``, git with an identity, and flows that commit in their
worktree or leave changes there."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import CLI, write_flow

# A round that commits a file in the lane's worktree, then leaves another one changed.
COMMITS = """
    import subprocess
    from flowdrop_tui import flow

    @flow()
    def main(run):
        for item in run.rounds(["one"]):
            run.progress({"done": 1})
            with open("work.txt", "w") as out:
                out.write(item)
            subprocess.run(["git", "add", "work.txt"], check=True)
            # its own message: two lanes committing in one second would otherwise make
            # the same commit, and one lane's merge would merge the other's too
            subprocess.run(["git", "commit", "-q", "-m", f"lane work of {run.key}"], check=True)
        return "committed"
"""

# A round that leaves an uncommitted change and an untracked binary file.
LEAVES = """
    from flowdrop_tui import flow

    @flow()
    def main(run):
        for _ in run.rounds([1]):
            with open("README", "a") as out:
                out.write("changed by the lane\\n")
            with open("blob.bin", "wb") as out:
                out.write(bytes(range(256)))
        return "left"
"""

# A round that does nothing at all to its worktree.
IDLE = """
    from flowdrop_tui import flow

    @flow()
    def main(run):
        for _ in run.rounds([1]):
            pass
        return "idle"
"""


@pytest.fixture
def lanes_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Lanes' worktrees under ``tmp_path``; git with an identity for the flows' commits."""
    home = tmp_path / "data"
    monkeypatch.setenv("XDG_DATA_HOME", str(home))
    for name in ("GIT_AUTHOR", "GIT_COMMITTER"):
        monkeypatch.setenv(f"{name}_NAME", "t")
        monkeypatch.setenv(f"{name}_EMAIL", "t@t")
    return home


def git(cwd: Path, *args: str, check: bool = True) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=False)
    if check:
        assert done.returncode == 0, (args, done.stderr)
    return done.stdout.strip()


def seed(ws: Path) -> None:
    """A tracked README on main, and the flows the lanes run."""
    (ws / "README").write_text("hello\n")
    (ws / ".gitignore").write_text(".flowdrop/\n")
    git(ws, "add", "README", ".gitignore")
    git(ws, "commit", "-q", "-m", "readme")
    write_flow(ws, "commits", COMMITS)
    write_flow(ws, "leaves", LEAVES)
    write_flow(ws, "idle", IDLE)


def run_lane(cli: CLI, key: str) -> dict[str, Any]:
    """Run lane ``key`` in the foreground to its end; its ``lanes --json`` row."""
    cli("run", key, check=0)
    flow = key.split("@")[0]
    return next(row for row in cli.json("lanes", flow) if row["key"] == key)


def lane_path(ws: Path, key: str) -> Path:
    from flowdrop_tui.core.lanes.known import lane_of
    from flowdrop_tui.core.paths import Layout

    lane = lane_of(Layout(ws), key)
    assert lane is not None
    return lane.path


def environ() -> dict[str, str]:
    return dict(os.environ)
