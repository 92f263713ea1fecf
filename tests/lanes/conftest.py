"""Lanes' tests: a real git repository whose flows are committed, lanes kept under the
test's own folder (``[lanes] dir``), and readers of what git and the records know."""

from __future__ import annotations

import os
import subprocess
import textwrap
from pathlib import Path
from typing import Any

import orjson
import pytest

from tests.conftest import CLI

GIT_ENV = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@t",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@t",
}

COUNTER = """
import os
from flowdrop_tui import flow

@flow(resumable=True)
def main(run):
    for _ in run.rounds(range(3)):
        run.state["n"] = run.state.get("n", 0) + 1
        with open("rounds.txt", "a") as out:
            out.write(f"{run.round} {os.getcwd()} {run.workspace}\\n")
"""


def git(ws: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", *args], cwd=ws, capture_output=True, text=True, env={**os.environ, **GIT_ENV}
    )
    assert done.returncode == 0, (args, done.stderr)
    return done.stdout


def commit_flow(ws: Path, name: str, body: str) -> None:
    """Write flows/<name>/flow.py and commit it: a lane's worktree holds what is committed."""
    folder = ws / "flows" / name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "flow.py").write_text(textwrap.dedent(body).lstrip())
    git(ws, "add", "-A")
    git(ws, "commit", "-q", "-m", f"flow {name}")


@pytest.fixture
def lanes_dir(workspace: Path) -> Path:
    """The workspace keeps its lanes beside it, in the test's folder."""
    where = workspace.parent / "lanes"
    records = workspace / ".flowdrop"
    records.mkdir()
    (records / ".gitignore").write_text("*\n")
    (records / "config.toml").write_text(f'[lanes]\ndir = "{where}"\n')
    return where


def events(ws: Path, run_id: str) -> list[dict[str, Any]]:
    lines = (ws / ".flowdrop" / "runs" / run_id / "cycle.jsonl").read_bytes().splitlines()
    return [orjson.loads(line) for line in lines if line.startswith(b"{")]


def runs_of(cli: CLI, key: str | None = None) -> list[dict[str, Any]]:
    rows = cli.json("runs", "--all")
    return [row for row in rows if key is None or row.get("flow") == key]


def unknown_to_records(ws: Path) -> tuple[set[str], set[str]]:
    """Worktrees and ``flowdrop/*`` branches git has that no lane record names."""
    from flowdrop_tui.core.lanes.known import lanes
    from flowdrop_tui.core.paths import Layout

    known = lanes(Layout(ws))
    paths = {os.path.realpath(lane.path) for lane in known}
    branches = {lane.branch for lane in known}
    listed = git(ws, "worktree", "list", "--porcelain").splitlines()
    trees = {
        os.path.realpath(line.split(" ", 1)[1]) for line in listed if line.startswith("worktree ")
    }
    trees.discard(os.path.realpath(ws))
    refs = set(git(ws, "for-each-ref", "--format=%(refname:short)", "refs/heads/flowdrop").split())
    return trees - paths, refs - branches


def git_locks(ws: Path) -> list[Path]:
    return sorted((ws / ".git").rglob("*.lock"))
