"""``flows/agent-lanes``, the lanes example, run as a person would: three lanes from a
plain ``run``, each committing in its worktree and asking through a gate, one answered
and landed with the command its question names. Claude Code is swapped for a command
that edits a file (the agent's own path is ``tests/gates``'s, with the real CLI)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import CLI, REPO, write_flow
from tests.lanes.test_land import git, lane_env
from tests.waiting import wait_for

AGENT = 'run.session("claude", run.state.get("task", TASK) if worked == 0 else GO_ON)'
EDITS = 'run.session("command", ["sh", "-c", "echo work of " + run.key + " >> agent.txt"])'


@pytest.fixture
def lanes_example(workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    lane_env(monkeypatch, tmp_path)
    source = (REPO / "flows" / "agent-lanes" / "flow.py").read_text()
    assert AGENT in source
    write_flow(workspace, "agent-lanes", source.replace(AGENT, EDITS))
    (workspace / ".gitignore").write_text(".flowdrop/\nflows/\n")
    git(workspace, "add", ".gitignore")
    git(workspace, "commit", "-q", "-m", "ignore the records")
    return workspace


def test_the_example_flow_loads_as_shipped(workspace: Path, cli: CLI) -> None:
    write_flow(workspace, "agent-lanes", (REPO / "flows" / "agent-lanes" / "flow.py").read_text())
    [row] = [row for row in cli.json("flows") if row["name"] == "agent-lanes"]
    assert row["error"] is None and row["resumable"] is True


def test_three_lanes_ask_and_the_one_answered_lands(lanes_example: Path, cli: CLI) -> None:
    """Guards the example's promise: each lane commits before it asks, its question
    names ``flowdrop-tui land KEY``, and nothing lands until a person runs it."""
    started = cli.json("run", "agent-lanes")
    assert sorted(row["key"] for row in started) == [f"agent-lanes@{n}" for n in (1, 2, 3)]
    asked = wait_for(lambda: _gates(cli, 3), 120, what="three lanes' questions")
    assert not (lanes_example / "agent.txt").exists()  # nothing landed by itself
    item = asked["agent-lanes@2"]
    assert "flowdrop-tui land agent-lanes@2" in item["message"]
    assert item["choices"] == ["land", "again", "drop"]
    command = str(item["command"]).replace("ANSWER", "land").split()
    cli(*command[1:], check=0)
    wait_for(lambda: cli.json("show", item["run"])["status"] == "completed", 60)
    landed = cli.json("land", "agent-lanes@2")
    assert landed["into"] == "main" and landed["method"] == "merge"
    assert (lanes_example / "agent.txt").read_text() == "work of agent-lanes@2\n" * 3
    assert git(lanes_example, "rev-parse", "HEAD").strip() == landed["commit"]


def _gates(cli: CLI, count: int) -> dict[str, dict[str, object]] | None:
    items = [item for item in cli.json("inbox") if item["kind"] == "gate"]
    return {str(item["flow"]): item for item in items} if len(items) == count else None
