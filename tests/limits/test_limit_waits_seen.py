"""A usage-limit wait is seen while it happens and ends on time (SPEC §19), with the
REAL Claude Code and Codex CLIs against the loopback mock.

- Claude Code waits out a short window inside its own session (a ``retry-after`` of
  about a minute or less): the run shows ``waiting`` from the moment the CLI writes
  the refusal to its transcript, with the reset it gives, and records ``limit_wait``
  with ``inside: true`` and its end.
- A wait flowdrop owns ends within 2 s of the known reset (plus the jitter of
  docs/sessions.md): measured from the recorded events, never from a clock here.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest

from flowdrop_tui.core.times import parse_time
from tests.agents.test_real_agents import Agents
from tests.agents_mock.server import ANSWER
from tests.conftest import CLI, events, state_of, wait_for
from tests.limits.test_limits_real import write

pytestmark = pytest.mark.real_agents


def named(workspace: Path, run_id: str, name: str) -> list[dict[str, Any]]:
    return [e for e in events(workspace, run_id) if e["event"] == name]


def seconds(iso: str) -> float:
    when = parse_time(iso)
    assert when is not None, iso
    return when.timestamp()


def test_a_codex_window_of_60_s_is_waited_no_more_than_62_s(
    cli: CLI,
    workspace: Path,
    flow_writer: Callable[[str, str], Path],
    agents: Agents,
) -> None:
    """The rollout's ``resets_at`` is exact: the wait flowdrop owns ends within 2 s of
    it, and the window (from the refused call to the wait's end) lasts at most 62 s."""
    window = agents.mock.close_window(60)
    write(flow_writer, "agent", "codex")
    run_id = str(cli.json("run", "agent", "--detach")["run"])
    wait_for(lambda: cli.json("show", run_id)["status"] == "completed", timeout=150)
    [wait] = named(workspace, run_id, "limit_wait")
    [ended] = named(workspace, run_id, "limit_wait_ended")
    assert wait["source"] == "rollout" and ended["outcome"] == "open"
    until, over = seconds(wait["until"]), seconds(ended["t"])
    assert abs(until - window.until) < 1.0  # the reset Codex read from the service
    assert until <= over <= until + 2.0, (wait, ended)
    [refused] = agents.mock.refused
    assert over - refused[1] <= 62.0
    [answered] = agents.mock.answered
    assert answered[1] >= window.until
    [result] = state_of(workspace, run_id)["agent"]["results"]
    assert result["ok"] is True and result["text"] == ANSWER


# Claude Code waits out a retry-after of about a minute or less inside its session
# (docs/sessions.md: 10, 15, 40 and 58 s behave alike); 40 s leaves a loaded machine time to look.
INSIDE_WINDOW = 40.0


def refusals(agents: Agents) -> list[dict[str, Any]]:
    """The lines of Claude Code's transcripts saying it was refused and will retry."""
    found = []
    for path in sorted(agents.claude_config.glob("projects/*/*.jsonl")):
        for raw in path.read_bytes().splitlines():
            line = orjson.loads(raw)
            if line.get("subtype") == "api_error" and line.get("retryInMs") is not None:
                found.append(line)
    return found


def test_a_wait_claude_code_makes_inside_its_session_is_shown(
    cli: CLI,
    workspace: Path,
    flow_writer: Callable[[str, str], Path],
    agents: Agents,
) -> None:
    """A window Claude Code waits out itself: the run shows ``waiting`` (with the reset
    it gave, ``inside``) while the session runs on, from within 2 s of the CLI writing
    the refusal to its transcript; ``limit_wait``/``limit_wait_ended`` say so, and the
    session — which ended well — is not limited and is not opened again."""
    window = agents.mock.close_window(INSIDE_WINDOW)
    write(flow_writer, "agent", "claude")
    run_id = str(cli.json("run", "agent", "--detach")["run"])
    waiting = wait_for(lambda: cli.json("show", run_id)["waiting"], timeout=60)
    assert waiting["backend"] == "claude" and waiting["inside"] is True
    assert waiting["until"] is not None
    detail = cli.json("show", run_id)
    assert detail["status"] == "running"
    assert cli.json("runs", "agent")[0]["waiting"]["inside"] is True
    assert "waiting for claude's limit until" in cli("show", run_id, check=0).stdout
    assert time.time() < window.until  # seen while the window was still closed
    wait_for(lambda: cli.json("show", run_id)["status"] == "completed", timeout=120)

    [wait] = named(workspace, run_id, "limit_wait")
    assert wait["inside"] is True and wait["source"] == "transcript"
    assert abs(seconds(wait["until"]) - window.until) < 1.0  # the reset Claude Code read
    first = refusals(agents)[0]
    assert seconds(wait["t"]) - seconds(first["timestamp"]) <= 2.0
    [ended] = named(workspace, run_id, "limit_wait_ended")
    assert ended["inside"] is True and ended["outcome"] == "open"
    assert seconds(ended["t"]) >= window.until
    [closed] = named(workspace, run_id, "session_closed")
    assert closed["exit_code"] == 0 and "limited" not in closed
    assert cli.json("show", run_id)["waiting"] is None
    [result] = state_of(workspace, run_id)["agent"]["results"]
    assert result["ok"] is True and result["text"] == ANSWER


async def test_the_ui_top_line_says_claude_code_waits_in_its_session(
    cli: CLI,
    workspace: Path,
    flow_writer: Callable[[str, str], Path],
    agents: Agents,
) -> None:
    """The UI's top line reads "agent (waiting for claude's limit until HH:MM (in its
    session))" while Claude Code waits a window out itself, and drops it after."""
    from flowdrop_tui.core.paths import Layout
    from flowdrop_tui.tui.widgets.workspace_bar import WorkspaceBar
    from tests.tui.tui_helpers import RecordingApp, until

    agents.mock.close_window(INSIDE_WINDOW)
    write(flow_writer, "agent", "claude")
    run_id = str(cli.json("run", "agent", "--detach")["run"])
    app = RecordingApp(Layout(workspace))
    async with app.run_test(size=(120, 36)) as pilot:
        bar = app.screen.query_one(WorkspaceBar)
        await until(
            pilot,
            lambda: (
                "agent (waiting for claude's limit until" in str(bar.render())
                and "(in its session)" in str(bar.render())
            ),
            what="the wait in the top line",
            timeout=60,
        )
        await until(
            pilot,
            lambda: (
                "waiting for claude" not in str(bar.render())
                and cli.json("show", run_id)["status"] == "completed"
            ),
            what="the wait over",
            timeout=120,
        )


@pytest.mark.parametrize(("asked", "status"), [("stop", "cancelled"), ("pause", "paused")])
def test_stop_or_pause_during_a_wait_inside_claude_code_acts_at_once(
    cli: CLI,
    workspace: Path,
    flow_writer: Callable[[str, str], Path],
    agents: Agents,
    asked: str,
    status: str,
) -> None:
    """Escape (`stop`) or `pause` while Claude Code waits a window out in its session
    acts at once, as during a wait of flowdrop's own: the session is interrupted (as
    Ctrl-C would), the run ends cancelled or paused long before the reset."""
    window = agents.mock.close_window(50)
    write(flow_writer, "agent", "claude", decorator="resumable=True")
    run_id = str(cli.json("run", "agent", "--detach")["run"])
    wait_for(lambda: (cli.json("show", run_id)["waiting"] or {}).get("inside"), timeout=60)
    cli(asked, run_id, check=0)
    wait_for(lambda: cli.json("show", run_id)["status"] == status, timeout=40)
    [ended] = named(workspace, run_id, "limit_wait_ended")
    assert ended["inside"] is True
    assert ended["outcome"] == {"stop": "stopped", "pause": "paused"}[asked]
    assert seconds(ended["t"]) < window.until  # at once, not after the wait
    [closed] = named(workspace, run_id, "session_closed")
    assert closed["interrupted"] is True and "limited" not in closed
    assert agents.mock.answered == []  # the model was never asked again
    assert cli.json("show", run_id)["waiting"] is None
