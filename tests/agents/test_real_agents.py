"""The `claude` and `codex` backends against the REAL Claude Code and Codex CLIs.

The CLIs come from npm (pinned, cached: tests/agents_mock/install.py) and talk
to a mock model server on 127.0.0.1 (tests/agents_mock/server.py); nothing
leaves loopback (any other host goes to a dead proxy). Each CLI start costs
about half a second, so each test runs one or two sessions; the tests are
independent and run in parallel under pytest-xdist.

Skipped, with the reason, only where node/npm are missing; `.ci/run` installs
them and sets FLOWDROP_REQUIRE_REAL_AGENTS=1, which turns that skip into a failure.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from flowdrop_tui.core.sessions.claude import folder_name
from tests.agents_mock import install
from tests.agents_mock.server import ANSWER, FAIL, FAIL_MESSAGE, STALL, MockModel
from tests.conftest import CLI, events, kill_live_runs, state_of, wait_for

pytestmark = pytest.mark.real_agents

FLOW = """
from flowdrop_tui import flow

@flow()
def main(run):
    results = []
    for prompt, cwd in {sessions!r}:
        result = run.session({backend!r}, prompt, **({{"cwd": cwd}} if cwd else {{}}))
        results.append({{
            "text": result.text, "exit_code": result.exit_code, "ok": result.ok,
            "transcript": str(result.transcript), "error": result.error,
            "interrupted": result.interrupted,
            "usage": result.usage.to_json() if result.usage else None,
        }})
        run.state["results"] = results
"""


@pytest.fixture(scope="session")
def agent_bin() -> Path:
    try:
        return install.ensure_installed()
    except install.NotInstallable as exc:
        if os.environ.get("FLOWDROP_REQUIRE_REAL_AGENTS"):
            pytest.fail(str(exc))
        pytest.skip(str(exc))


@dataclass
class Agents:
    mock: MockModel
    home: Path
    claude_config: Path
    codex_home: Path


@pytest.fixture
def agents(agent_bin: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Agents]:
    """The real CLIs first on PATH, configured for the mock model; nothing of the
    user's own configuration (a fresh HOME, config folders of their own)."""
    mock = MockModel()
    url = mock.start()
    home = tmp_path / "home"
    claude_config = home / "claude-config"
    codex_home = home / "codex-home"
    codex_home.mkdir(parents=True)
    (codex_home / "config.toml").write_text(
        f"""model = "gpt-5-codex"
model_provider = "mock"

[model_providers.mock]
name = "mock model on loopback"
base_url = "{url}/v1"
wire_api = "responses"
env_key = "MOCK_MODEL_KEY"

[features]
plugins = false

[analytics]
enabled = false
"""
    )
    for name in list(os.environ):
        if name.startswith(("ANTHROPIC_", "CLAUDE_", "CODEX_", "OPENAI_", "FAKE_")):
            monkeypatch.delenv(name)
    monkeypatch.setenv("PATH", f"{agent_bin}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("ANTHROPIC_BASE_URL", url)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-mock")
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(claude_config))
    monkeypatch.setenv("DISABLE_AUTOUPDATER", "1")
    monkeypatch.setenv("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
    monkeypatch.setenv("CODEX_HOME", str(codex_home))
    monkeypatch.setenv("MOCK_MODEL_KEY", "sk-mock")
    # Belt and braces: a request for any other host goes to a proxy that is not there.
    for proxy in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy"):
        monkeypatch.setenv(proxy, "http://127.0.0.1:9")
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")
    yield Agents(mock, home, claude_config, codex_home)
    mock.close()
    assert not mock.unexpected, [(r.method, r.path) for r in mock.unexpected]


def run_flow(
    cli: CLI,
    flow_writer: Callable[[str, str], Path],
    backend: str,
    sessions: list[tuple[str, str | None]],
) -> str:
    flow_writer("agent", FLOW.format(backend=backend, sessions=sessions))
    cli("run", "agent", check=0, timeout=120)
    return str(cli.json("runs", "agent")[0]["run"])


API = {"claude": "anthropic", "codex": "openai"}


@pytest.mark.parametrize("backend", ["claude", "codex"])
def test_a_session_with_the_real_cli_links_its_transcript_and_reads_its_usage(
    cli: CLI,
    workspace: Path,
    flow_writer: Callable[[str, str], Path],
    agents: Agents,
    backend: str,
) -> None:
    """One session: the answer comes back, the link resolves to the transcript the real
    CLI wrote in its own place, and the usage recorded is what the model reported,
    counted once (Claude Code repeats a message's usage on each of its lines)."""
    run_id = run_flow(cli, flow_writer, backend, [("tidy the README", None)])
    [result] = state_of(workspace, run_id)["agent"]["results"]
    assert result["text"] == ANSWER and result["ok"] is True and result["exit_code"] == 0
    assert result["interrupted"] is False and result["error"] is None
    transcript = Path(result["transcript"])
    if backend == "claude":
        folder = agents.claude_config / "projects" / folder_name(os.path.realpath(workspace))
        assert transcript.parent == folder
    else:
        assert transcript.is_relative_to(agents.codex_home / "sessions")
    assert transcript.is_file() and "tidy the README" in transcript.read_text()

    reported = agents.mock.total(API[backend])
    assert len(agents.mock.reported) == 1 and reported["output"] > 0
    assert result["usage"] == reported

    detail = cli.json("show", run_id)
    [row] = detail["sessions"]
    link = workspace / ".flowdrop" / "runs" / run_id / row["link"]
    assert link.resolve() == transcript.resolve()
    assert row["exists"] is True and row["target"] == str(transcript)
    assert row["usage"] == reported and detail["usage"] == reported
    closed = next(e for e in events(workspace, run_id) if e["event"] == "session_closed")
    assert closed["usage"] == reported and closed["interrupted"] is False
    assert cli.json("runs", "agent")[0]["usage"] == reported
    [flow] = [f for f in cli.json("flows") if f["name"] == "agent"]
    assert flow["usage"] == reported
    text = cli("show", run_id, check=0).stdout
    assert f"{reported['output']} out" in text

    # The usage outlives the transcript: it was recorded when the session closed.
    transcript.unlink()
    detail = cli.json("show", run_id)
    assert detail["sessions"][0]["exists"] is False and detail["usage"] == reported


@pytest.mark.parametrize("backend", ["claude", "codex"])
def test_a_failing_model_is_a_failed_session_not_a_failed_run(
    cli: CLI,
    workspace: Path,
    flow_writer: Callable[[str, str], Path],
    agents: Agents,
    backend: str,
) -> None:
    """The model refuses (HTTP 400): the session is not ok and says why; the run completes."""
    run_id = run_flow(cli, flow_writer, backend, [(f"{FAIL} tidy the README", None)])
    [result] = state_of(workspace, run_id)["agent"]["results"]
    assert result["ok"] is False and result["exit_code"] != 0
    assert FAIL_MESSAGE in str(result["error"])
    assert cli.json("show", run_id)["status"] == "completed"


def test_claude_links_its_transcript_from_a_deep_path_and_an_emoji_path(
    cli: CLI,
    workspace: Path,
    flow_writer: Callable[[str, str], Path],
    agents: Agents,
) -> None:
    """Claude Code cuts a project folder name over 200 characters and appends a hash
    of the path, and spells an emoji as two dashes: each transcript is found and
    linked. With the old rule a path over 255 characters made the lookup fail with
    ENAMETOOLONG, and one between 200 and 255 was looked for where it is not."""
    deep = workspace / "/".join(["a-folder-deep-in-the-tree"] * 10)
    real = os.path.realpath(workspace)
    middle = workspace / ("m" * (230 - len(real) - 1))  # a path of 230 characters
    emoji = workspace / "launch 🚀 café"
    folders = (deep, middle, emoji)
    for folder in folders:
        folder.mkdir(parents=True)
    assert len(os.path.realpath(deep)) > 255 and len(os.path.realpath(middle)) == 230
    run_id = run_flow(
        cli, flow_writer, "claude", [(f"from {f.name[:10]}", str(f)) for f in folders]
    )
    results = state_of(workspace, run_id)["agent"]["results"]
    assert [r["ok"] for r in results] == [True, True, True]
    projects = agents.claude_config / "projects"
    written = sorted(p.parent.name for p in projects.glob("*/*.jsonl"))
    expected = sorted(folder_name(os.path.realpath(f)) for f in folders)
    assert written == expected  # the rule is Claude Code's, to the hash
    assert any("--" in name and name.endswith("-caf-") for name in written)
    rows = cli.json("show", run_id)["sessions"]
    assert [r["exists"] for r in rows] == [True, True, True]
    for row, result in zip(rows, results, strict=True):
        link = workspace / ".flowdrop" / "runs" / run_id / row["link"]
        assert link.resolve() == Path(result["transcript"]).resolve()
    assert not [e for e in events(workspace, run_id) if e["event"] == "warning"]


# -- stopping ---------------------------------------------------------------------------


def group_members(pgid: int) -> list[int]:
    """Every live process (not a zombie) in process group ``pgid``."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as stat:
                data = stat.read()
        except OSError:
            continue
        fields = data[data.rfind(b")") + 2 :].split()
        if int(fields[2]) == pgid and fields[0] != b"Z":
            found.append(int(name))
    return found


def children_of(pid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as children:
            return [int(c) for c in children.read().split()]
    except OSError:
        return []


def stop_flow(backend: str) -> str:
    return f"""
from flowdrop_tui import flow

@flow()
def main(run):
    for n in run.rounds():
        run.state["round"] = n
        result = run.session({backend!r}, "{STALL} a long task")
        run.state["result"] = {{"interrupted": result.interrupted, "ok": result.ok}}
"""


def start_stalled(
    cli: CLI, flow_writer: Callable[[str, str], Path], agents: Agents, backend: str
) -> tuple[str, int]:
    """A detached run whose session waits on the model; its id and process group."""
    flow_writer("slow", stop_flow(backend))
    run_id = str(cli.json("run", "slow", "--detach")["run"])
    assert agents.mock.stalled.wait(60), "the CLI never reached the model"
    pid = int(cli.json("show", run_id)["pid"])
    return run_id, os.getpgid(pid)


def assert_stopped_cleanly(cli: CLI, workspace: Path, run_id: str, pgid: int) -> dict[str, Any]:
    wait_for(lambda: cli.json("show", run_id)["status"] == "cancelled", timeout=60)
    closed = [e for e in events(workspace, run_id) if e["event"] == "session_closed"]
    assert len(closed) == 1 and closed[0]["interrupted"] is True
    assert [e["outcome"] for e in events(workspace, run_id) if e["event"] == "ended"] == [
        "cancelled"
    ]
    [row] = cli.json("show", run_id)["sessions"]
    assert row["interrupted"] is True and row["exists"] is True
    assert "a long task" in Path(row["target"]).read_text()  # what it wrote, still linked
    wait_for(lambda: not group_members(pgid), timeout=30)  # no process left
    return row


@pytest.mark.parametrize("backend", ["claude", "codex"])
def test_stop_now_interrupts_the_real_cli_whatever_it_exits_with(
    cli: CLI,
    workspace: Path,
    flow_writer: Callable[[str, str], Path],
    agents: Agents,
    backend: str,
) -> None:
    """`stop --now` mid-session: the real CLI takes the SIGINT and exits its own way
    (Claude Code 0, Codex 1, neither dies of the signal); the session is interrupted
    because the run asked it to stop, the run ends cancelled, and no process is left."""
    run_id, pgid = start_stalled(cli, flow_writer, agents, backend)
    cli("stop", run_id, "--now", check=0)
    row = assert_stopped_cleanly(cli, workspace, run_id, pgid)
    assert row["exit_code"] == {"claude": 0, "codex": 1}[backend]
    assert state_of(workspace, run_id)["slow"] == {"round": 1}


def test_a_frozen_codex_native_process_is_killed_with_its_wrapper(
    cli: CLI,
    workspace: Path,
    flow_writer: Callable[[str, str], Path],
    agents: Agents,
) -> None:
    """On Node < 22.15 `codex` is a Node wrapper with the native binary as its child.
    Frozen (SIGSTOP), the native one cannot take the SIGINT; after the grace period
    the session's whole tree is killed, not only the wrapper, and nothing survives."""
    run_id, pgid = start_stalled(cli, flow_writer, agents, "codex")
    run_pid = int(cli.json("show", run_id)["pid"])
    [wrapper] = children_of(run_pid)
    natives = children_of(wrapper)
    if not natives:  # Node >= 22.15 execs the native binary: nothing to orphan
        pytest.skip("this Node runs codex as one process (process.execve)")
    [native] = natives
    os.kill(native, signal.SIGSTOP)
    try:
        cli("stop", run_id, "--now", check=0)
        assert_stopped_cleanly(cli, workspace, run_id, pgid)
        assert not os.path.exists(f"/proc/{native}") or _zombie(native)
    finally:
        try:
            os.kill(native, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            data = stat.read()
    except OSError:
        return True
    return data[data.rfind(b")") + 2 :].split()[0] == b"Z"


def test_codex_is_given_no_stdin_to_wait_on(
    cli: CLI,
    workspace: Path,
    flow_writer: Callable[[str, str], Path],
    agents: Agents,
) -> None:
    """Codex reads stdin to its end even with the prompt as an argument. The run is
    started with a stdin that never ends: the session still completes, because the
    backend gives the CLI a closed stdin of its own (a regression hangs here)."""
    flow_writer("agent", FLOW.format(backend="codex", sessions=[("tidy the README", None)]))
    run = subprocess.Popen(
        [sys.executable, "-m", "flowdrop_tui", "run", "agent"],
        cwd=workspace,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        code = run.wait(timeout=60)  # its stdin still open: never at its end
    finally:
        if run.poll() is None:
            kill_live_runs(workspace)
            run.kill()
        _, err = run.communicate()
    assert code == 0, err.decode()
    run_id = str(cli.json("runs", "agent")[0]["run"])
    [result] = state_of(workspace, run_id)["agent"]["results"]
    assert result["text"] == ANSWER


def test_a_claude_session_refused_every_round_pauses_the_loop_after_five(
    cli: CLI,
    workspace: Path,
    flow_writer: Callable[[str, str], Path],
    agents: Agents,
) -> None:
    """SPEC §20, as the issue tried it: Claude Code answered 400 by the model every
    round. Without a budget the loop pauses after exactly 5 rounds, `same_failure`,
    naming the CLI's error."""
    flow_writer(
        "refused",
        f"""
from flowdrop_tui import flow

@flow(resumable=True)
def main(run):
    for n in run.rounds():
        run.session("claude", {f"{FAIL} tidy the README"!r})
""",
    )
    done = cli("run", "refused", check=0, timeout=300)
    run_id = str(cli.json("runs", "refused")[0]["run"])
    rounds = [e["round"] for e in events(workspace, run_id) if e["event"] == "round_started"]
    assert rounds == [1, 2, 3, 4, 5]
    paused_by = cli.json("show", run_id)["paused_by"]
    assert paused_by["kind"] == "same_failure" and paused_by["rounds"] == rounds
    assert FAIL_MESSAGE in str(paused_by["error"])
    assert "same failure 5 rounds in a row: " in done.stderr


def test_a_real_claude_loop_that_changes_nothing_is_paused_stalled_after_five(
    cli: CLI,
    workspace: Path,
    flow_writer: Callable[[str, str], Path],
    agents: Agents,
) -> None:
    """SPEC §20, the case the cutoff exists for: Claude Code answers every round and
    changes nothing — no file, no commit, no state. Rounds that opened an agent session
    count: the loop is paused `stalled` after exactly 5, each round measured (a tree
    digest and a snapshot) and none changed."""
    flow_writer(
        "idle",
        """
from flowdrop_tui import flow

@flow(resumable=True)
def main(run):
    for n in run.rounds():
        run.session("claude", "tidy the README")
""",
    )
    done = cli("run", "idle", check=0, timeout=300)
    run_id = str(cli.json("runs", "idle")[0]["run"])
    rounds = [e["round"] for e in events(workspace, run_id) if e["event"] == "round_started"]
    assert rounds == [1, 2, 3, 4, 5]
    paused_by = cli.json("show", run_id)["paused_by"]
    assert paused_by["kind"] == "stalled" and paused_by["rounds"] == rounds
    assert "stalled: 5 rounds without a change" in done.stderr
    assert len(agents.mock.reported) == 5
    for ended in (e for e in events(workspace, run_id) if e["event"] == "round_ended"):
        moved = ended["moved"]
        assert moved["counted"] is True and moved["changed"] == []
        assert moved["snapshot"]["start"] == moved["snapshot"]["end"]
    assert "no changes" in cli("diff", run_id, "--round", "3", check=0).stdout
