"""``flows/agent-loop``, the example a new user is here for, run as they would: the real
Claude Code against the loopback mock, the real CLI, its question answered from the
command the inbox gives."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.agents.test_real_agents import Agents
from tests.conftest import CLI, REPO, events, state_of, wait_for

pytestmark = pytest.mark.real_agents


def test_the_agent_loop_example_asks_before_it_lands(
    cli: CLI, workspace: Path, agents: Agents
) -> None:
    shutil.copytree(REPO / "flows" / "agent-loop", workspace / "flows" / "agent-loop")
    flows = {row["name"]: row for row in cli.json("flows")}
    assert flows["agent-loop"]["error"] is None and flows["agent-loop"]["resumable"] is True
    assert flows["agent-loop"]["budget"]["rounds"]["limit"] == 20
    run_id = str(cli.json("run", "agent-loop", "--detach")["run"])
    wait_for(lambda: cli.json("show", run_id)["gate"] is not None, 120)
    proposal = state_of(workspace, run_id)["agent-loop"]["proposal"]
    assert proposal["ok"] is True and proposal["text"]
    [item] = cli.json("inbox")
    assert item["kind"] == "gate" and item["run"] == run_id and item["flow"] == "agent-loop"
    assert item["choices"] == ["land", "again", "stop"]
    command = str(item["command"]).replace("ANSWER", "land").split()
    cli(*command[1:], check=0)
    wait_for(lambda: cli.json("show", run_id)["status"] == "completed", 120)
    shown = cli.json("show", run_id)
    assert shown["result"] == "landed 1 change(s)"
    assert shown["sessions"][0]["backend"] == "claude"
    names = [e["event"] for e in events(workspace, run_id)]
    assert names.count("gate_opened") == 1 and names.count("gate_answered") == 1
    assert len(agents.mock.reported) == 1  # the agent ran once: the asking round only asks
    started = [
        (e["round"], bool(e.get("again")))
        for e in events(workspace, run_id)
        if e["event"] == "round_started"
    ]
    assert started == [(1, False), (2, False), (2, True)]  # the asking round, as itself
    assert cli.json("inbox") == []
