"""Usage limits waited out (SPEC §19), with the REAL Claude Code and Codex CLIs.

The mock model (tests/agents_mock/server.py) refuses calls as the services do at
a limit for a window of a few seconds. Claude Code gives no reset time with an API
key, and waits out a ``retry-after`` of about a minute or less itself: so its
windows here announce a longer reset than they last (the CLI gives up at once, as
at a real long limit) and flowdrop probes, with the first probe moved to a few
seconds (``FLOWDROP_LIMIT_PROBE_SECONDS``). Codex's rollout carries the reset.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest

from tests.agents.test_real_agents import Agents
from tests.agents_mock.server import ANSWER, LIMIT_TALK, SAY_LIMIT
from tests.conftest import CLI, events, state_of, wait_for

pytestmark = pytest.mark.real_agents

FLOW = """
from flowdrop_tui import flow

@flow({decorator})
def main(run):
    for n in run.rounds():
        result = run.session({backend!r}, {prompt!r})
        run.state["results"] = list(run.state.get("results", [])) + [{{
            "ok": result.ok, "text": result.text, "limited": result.limited,
            "error": result.error, "exit_code": result.exit_code,
        }}]
        if n >= {rounds}:
            break
"""


def write(
    flow_writer: Callable[[str, str], Path],
    name: str,
    backend: str,
    *,
    rounds: int = 1,
    prompt: str = "tidy the README",
    decorator: str = "",
) -> None:
    flow_writer(
        name, FLOW.format(backend=backend, rounds=rounds, prompt=prompt, decorator=decorator)
    )


def close(agents: Agents, backend: str, seconds: float, monkeypatch: pytest.MonkeyPatch) -> None:
    """Close the account for ``seconds``; Claude probes after ``seconds`` + 2."""
    if backend == "claude":
        agents.mock.close_window(seconds, announce=seconds + 300)
        monkeypatch.setenv("FLOWDROP_LIMIT_PROBE_SECONDS", str(seconds + 2))
    else:
        agents.mock.close_window(seconds)


def named(workspace: Path, run_id: str, name: str) -> list[dict[str, Any]]:
    return [e for e in events(workspace, run_id) if e["event"] == name]


def windows(workspace: Path) -> dict[str, Any]:
    path = workspace / ".flowdrop" / "limits.json"
    return orjson.loads(path.read_bytes())["windows"] if path.exists() else {}


@pytest.mark.parametrize("backend", ["claude", "codex"])
def test_a_limited_session_is_waited_out_and_opened_again(
    cli: CLI,
    workspace: Path,
    flow_writer: Callable[[str, str], Path],
    agents: Agents,
    backend: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The CLI is refused at a limit: the run waits (running, `waiting` in show/runs),
    then opens a new session with the same prompt, whose good result the flow gets.
    One call inside the window; the window is cleared once the call succeeds."""
    close(agents, backend, 8, monkeypatch)
    write(flow_writer, "agent", backend)
    run_id = str(cli.json("run", "agent", "--detach")["run"])
    waiting = wait_for(lambda: cli.json("show", run_id)["waiting"], timeout=60)
    assert waiting["backend"] == backend and waiting["since"]
    assert cli.json("show", run_id)["status"] == "running"
    assert cli.json("runs", "agent")[0]["waiting"]["backend"] == backend
    assert windows(workspace)[backend]["source"]
    wait_for(lambda: cli.json("show", run_id)["status"] == "completed", timeout=120)

    [result] = state_of(workspace, run_id)["agent"]["results"]
    assert result == {
        "ok": True,
        "text": ANSWER,
        "limited": None,
        "error": None,
        "exit_code": 0,
    }
    [wait] = named(workspace, run_id, "limit_wait")
    assert wait["backend"] == backend and wait["shared"] is False
    assert wait["source"] == {"claude": "result", "codex": "rollout"}[backend]
    if backend == "codex":
        assert wait["until"] is not None  # the rollout's resets_at
    else:
        assert wait["until"] is None and wait["next_probe"] is not None
    [ended] = named(workspace, run_id, "limit_wait_ended")
    assert ended["outcome"] == "open" and ended["seconds"] > 5
    closed = named(workspace, run_id, "session_closed")
    assert len(closed) == 2 and closed[0]["limited"]["source"] == wait["source"]
    assert "limited" not in closed[1]
    assert len(agents.mock.refused) == 1 and len(agents.mock.answered) == 1
    assert backend not in windows(workspace)
    assert cli.json("show", run_id)["waiting"] is None
    # the wait counts toward no budget: minutes used stay under the time it took
    minutes = cli.json("show", run_id)["budget"]["minutes"]["used"]
    assert minutes * 60 < ended["seconds"]


def test_a_second_flow_waits_on_the_same_window_without_calling(
    cli: CLI,
    workspace: Path,
    flow_writer: Callable[[str, str], Path],
    agents: Agents,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """One flow is limited; a second flow of the same backend started meanwhile waits
    on the window in limits.json without a call of its own; one probe opens it for both."""
    close(agents, "claude", 10, monkeypatch)
    write(flow_writer, "first", "claude")
    write(flow_writer, "second", "claude")
    first = str(cli.json("run", "first", "--detach")["run"])
    wait_for(lambda: "claude" in windows(workspace), timeout=60)
    second = str(cli.json("run", "second", "--detach")["run"])
    wait_for(lambda: named(workspace, second, "limit_wait"), timeout=30)
    for run_id in (first, second):
        wait_for(lambda r=run_id: cli.json("show", r)["status"] == "completed", timeout=120)
    [wait] = named(workspace, second, "limit_wait")[:1]
    assert wait["shared"] is True
    assert len(agents.mock.refused) == 1  # the first flow's call, and nothing more
    assert len(agents.mock.answered) == 2
    assert len(named(workspace, second, "session_opened")) == 1  # it never called limited
    for run_id in (first, second):
        [result] = state_of(workspace, run_id)[cli.json("show", run_id)["flow"]]["results"]
        assert result["ok"] is True and result["text"] == ANSWER


def test_a_run_killed_while_it_waits_is_picked_up_and_waits_out_the_rest(
    cli: CLI,
    workspace: Path,
    flow_writer: Callable[[str, str], Path],
    agents: Agents,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """kill -9 during a wait: the run shows interrupted (not waiting); a pick-up waits
    out what is left of the window before its first call, then succeeds."""
    close(agents, "codex", 12, monkeypatch)
    until = agents.mock.window.until if agents.mock.window else 0.0
    write(flow_writer, "agent", "codex")
    killed = str(cli.json("run", "agent", "--detach")["run"])
    wait_for(lambda: cli.json("show", killed)["waiting"], timeout=60)
    os.kill(int(cli.json("show", killed)["pid"]), signal.SIGKILL)
    wait_for(lambda: cli.json("show", killed)["status"] == "interrupted", timeout=30)
    assert cli.json("show", killed)["waiting"] is None
    assert time.time() < until  # still inside the window
    cli("run", "agent", check=0, timeout=180)
    picked = str(cli.json("runs", "agent")[0]["run"])
    assert picked != killed
    [wait] = named(workspace, picked, "limit_wait")
    assert wait["shared"] is True and wait["until"] is not None
    assert len(agents.mock.refused) == 1  # the pick-up never called inside the window
    [answered] = agents.mock.answered
    assert answered[1] >= until
    [result] = state_of(workspace, picked)["agent"]["results"]
    assert result["ok"] is True


def test_stop_during_a_wait_ends_the_run_at_once(
    cli: CLI,
    workspace: Path,
    flow_writer: Callable[[str, str], Path],
    agents: Agents,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Escape (`stop`, not `--now`) while the run waits out an hour-long window: the run
    ends cancelled at once, not after the round (which would be an hour away)."""
    agents.mock.close_window(3600)
    write(flow_writer, "agent", "codex")
    run_id = str(cli.json("run", "agent", "--detach")["run"])
    wait_for(lambda: cli.json("show", run_id)["waiting"], timeout=60)
    cli("stop", run_id, check=0)
    wait_for(lambda: cli.json("show", run_id)["status"] == "cancelled", timeout=15)
    [ended] = named(workspace, run_id, "limit_wait_ended")
    assert ended["outcome"] == "stopped"
    assert len(agents.mock.refused) == 1


def test_pause_during_a_wait_pauses_at_once_and_resume_waits_again(
    cli: CLI,
    workspace: Path,
    flow_writer: Callable[[str, str], Path],
    agents: Agents,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    agents.mock.close_window(3600)
    write(flow_writer, "agent", "codex", decorator="resumable=True")
    run_id = str(cli.json("run", "agent", "--detach")["run"])
    wait_for(lambda: cli.json("show", run_id)["waiting"], timeout=60)
    cli("pause", run_id, check=0)
    wait_for(lambda: cli.json("show", run_id)["status"] == "paused", timeout=15)
    assert [e["outcome"] for e in named(workspace, run_id, "limit_wait_ended")] == ["paused"]
    cli("resume", run_id, "--detach", check=0)
    wait_for(lambda: len(named(workspace, run_id, "limit_wait")) == 2, timeout=60)
    assert cli.json("show", run_id)["waiting"]["backend"] == "codex"
    assert len(agents.mock.refused) == 1  # the resumed run waits without calling
    cli("stop", run_id, check=0)
    wait_for(lambda: cli.json("show", run_id)["status"] == "cancelled", timeout=15)


def test_a_window_longer_than_limit_wait_pauses_the_run(
    cli: CLI,
    workspace: Path,
    flow_writer: Callable[[str, str], Path],
    agents: Agents,
) -> None:
    """`--limit-wait 1m` and an hour-long window: the run pauses at once with
    `limit_reached` naming the reset; `show` says so."""
    agents.mock.close_window(3600)
    write(flow_writer, "agent", "codex")
    done = cli("run", "agent", "--limit-wait", "1m", check=0, timeout=120)
    assert "usage limit" in done.stderr
    run_id = str(cli.json("runs", "agent")[0]["run"])
    detail = cli.json("show", run_id)
    assert detail["status"] == "paused"
    assert detail["limit_reached"]["backend"] == "codex"
    assert detail["limit_reached"]["until"] is not None
    assert detail["limit_reached"]["limit_wait"] == 60
    assert len(agents.mock.refused) == 1


@pytest.mark.parametrize("backend", ["claude", "codex"])
def test_limit_wait_zero_hands_the_limited_result_to_the_flow(
    cli: CLI,
    workspace: Path,
    flow_writer: Callable[[str, str], Path],
    agents: Agents,
    backend: str,
) -> None:
    agents.mock.close_window(3600)
    write(flow_writer, "agent", backend, decorator="limit_wait=0")
    cli("run", "agent", check=0, timeout=120)
    run_id = str(cli.json("runs", "agent")[0]["run"])
    [result] = state_of(workspace, run_id)["agent"]["results"]
    assert result["ok"] is False and result["limited"]["source"]
    if backend == "codex":
        assert result["limited"]["until"] is not None
    assert not named(workspace, run_id, "limit_wait")
    assert len(agents.mock.refused) == 1


@pytest.mark.parametrize("backend", ["claude", "codex"])
def test_an_answer_that_talks_about_rate_limits_is_not_a_limit(
    cli: CLI,
    workspace: Path,
    flow_writer: Callable[[str, str], Path],
    agents: Agents,
    backend: str,
) -> None:
    write(flow_writer, "agent", backend, prompt=f"{SAY_LIMIT} explain rate limits")
    cli("run", "agent", check=0, timeout=120)
    run_id = str(cli.json("runs", "agent")[0]["run"])
    [result] = state_of(workspace, run_id)["agent"]["results"]
    assert result["ok"] is True and result["text"] == LIMIT_TALK
    assert result["limited"] is None
    assert not named(workspace, run_id, "limit_wait")
    assert not windows(workspace)


async def test_the_ui_says_a_run_waits_in_its_top_line_and_run_pane(
    cli: CLI,
    workspace: Path,
    flow_writer: Callable[[str, str], Path],
    agents: Agents,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Guards SPEC §19's "the UI shows the wait": a run waiting out a limit reads
    "waiting for codex's limit until HH:MM" in the top line beside its flow, and the
    top line drops it once the wait has ended."""
    from flowdrop_tui.core.paths import Layout
    from flowdrop_tui.tui.widgets.workspace_bar import WorkspaceBar
    from tests.tui.tui_helpers import RecordingApp, until

    close(agents, "codex", 8, monkeypatch)
    write(flow_writer, "agent", "codex")
    run_id = str(cli.json("run", "agent", "--detach")["run"])
    wait_for(lambda: cli.json("show", run_id)["waiting"], timeout=60)
    app = RecordingApp(Layout(workspace))
    async with app.run_test(size=(120, 36)) as pilot:
        bar = app.screen.query_one(WorkspaceBar)
        await until(
            pilot,
            lambda: "agent (waiting for codex's limit until" in str(bar.render()),
            what="the wait in the top line",
            timeout=60,
        )
        await until(
            pilot,
            lambda: (
                "waiting for codex" not in str(bar.render())
                and cli.json("show", run_id)["status"] == "completed"
            ),
            what="the wait over",
            timeout=120,
        )
