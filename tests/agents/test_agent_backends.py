"""The `claude` and `codex` backends end to end, against stand-in CLIs (tests/fakes/bin).

The stand-ins take the real CLIs' arguments and write their transcripts where the
real ones do, under a temporary HOME (or CLAUDE_CONFIG_DIR / CODEX_HOME), so
these tests check that flowdrop links the file each CLI writes in its own place.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import CLI, events, state_of, wait_for

FAKES = Path(__file__).resolve().parent.parent / "fakes" / "bin"

AGENT_FLOW = """
from flowdrop_tui import flow

@flow()
def main(run):
    result = run.session({backend!r}, "tidy the README", {options})
    run.state["result"] = {{
        "text": result.text, "exit_code": result.exit_code, "ok": result.ok,
        "transcript": str(result.transcript), "error": result.error,
        "interrupted": result.interrupted, "link": str(result.link),
    }}
"""


@pytest.fixture
def agents(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The stand-ins first on PATH and a fresh HOME; returns that HOME."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("PATH", f"{FAKES}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("HOME", str(home))
    for name in (
        "CLAUDE_CONFIG_DIR",
        "CODEX_HOME",
        "FAKE_AGENT_SLEEP",
        "FAKE_AGENT_EXIT",
        "FAKE_CLAUDE_FOLDER",
    ):
        monkeypatch.delenv(name, raising=False)
    return home


def run_flow(cli: CLI, flow_writer: Callable[[str, str], Path], backend: str, options: str) -> str:
    flow_writer("agent", AGENT_FLOW.format(backend=backend, options=options))
    cli("run", "agent", check=0)
    return str(cli.json("runs", "agent")[0]["run"])


def lines(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def claude_folder(workspace: Path) -> str:
    return re.sub(r"[^A-Za-z0-9]", "-", os.path.realpath(workspace))


def test_claude_session_links_the_transcript_claude_code_writes(
    cli: CLI, workspace: Path, flow_writer: Callable[[str, str], Path], agents: Path
) -> None:
    """`claude -p` runs with the options passed through; its own transcript under
    ~/.claude/projects/<cwd>/<session-id>.jsonl is linked, not copied."""
    run_id = run_flow(
        cli, flow_writer, "claude", "model='opus', args=['--permission-mode', 'acceptEdits']"
    )
    result = state_of(workspace, run_id)["agent"]["result"]
    assert result["text"] == "done: tidy the README" and result["ok"] is True
    transcript = Path(result["transcript"])
    assert transcript.parent == agents / ".claude" / "projects" / claude_folder(workspace)
    assert re.fullmatch(r"[0-9a-f-]{36}\.jsonl", transcript.name)
    records = lines(transcript)
    assert records[0]["message"] == {"role": "user", "content": "tidy the README"}
    assert records[1]["message"]["model"] == "opus"  # type: ignore[index]

    link = workspace / ".flowdrop" / "runs" / run_id / "sessions" / "000001-claude.jsonl"
    assert link.is_symlink() and Path(os.readlink(link)) == transcript
    assert not (workspace / ".flowdrop" / "transcripts").exists()  # linked, never copied
    opened = next(e for e in events(workspace, run_id) if e["event"] == "session_opened")
    assert opened["backend"] == "claude" and opened["target"] == str(transcript)
    assert (
        "--model opus" in opened["command"] and "--permission-mode acceptEdits" in opened["command"]
    )
    assert f"--session-id {transcript.stem}" in opened["command"]
    detail = cli.json("show", run_id)
    assert detail["sessions"][0]["exists"] is True
    assert detail["sessions"][0]["target"] == str(transcript)
    # Two lines (thinking, text) repeat one message's usage: counted once.
    spent = {"input": 1001 + 5001 + 301, "output": 41, "cache_read": 5001, "cache_write": 301}
    assert detail["sessions"][0]["usage"] == spent and detail["usage"] == spent


def test_claude_honours_claude_config_dir(
    cli: CLI,
    workspace: Path,
    flow_writer: Callable[[str, str], Path],
    agents: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With CLAUDE_CONFIG_DIR set, the transcript is under it, and that is what is linked."""
    config = tmp_path / "claude-config"
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(config))
    run_id = run_flow(cli, flow_writer, "claude", "")
    transcript = Path(state_of(workspace, run_id)["agent"]["result"]["transcript"])
    assert transcript.is_relative_to(config / "projects")
    assert not (agents / ".claude").exists()
    assert cli.json("show", run_id)["sessions"][0]["exists"] is True


def test_a_claude_transcript_in_another_project_folder_is_found_by_its_id(
    cli: CLI,
    workspace: Path,
    flow_writer: Callable[[str, str], Path],
    agents: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The project folder's spelling is Claude Code's business: when the transcript is not
    where the rule says, the link is re-pointed at the file with the session's id."""
    monkeypatch.setenv("FAKE_CLAUDE_FOLDER", "spelt-differently")
    run_id = run_flow(cli, flow_writer, "claude", "")
    transcript = Path(state_of(workspace, run_id)["agent"]["result"]["transcript"])
    assert transcript.parent == agents / ".claude" / "projects" / "spelt-differently"
    row = cli.json("show", run_id)["sessions"][0]
    assert row["target"] == str(transcript) and row["exists"] is True
    closed = next(e for e in events(workspace, run_id) if e["event"] == "session_closed")
    assert closed["target"] == str(transcript)


def test_a_failing_claude_session_returns_its_exit_code_and_error(
    cli: CLI, workspace: Path, flow_writer: Callable[[str, str], Path], agents: Path
) -> None:
    """A CLI that fails is the flow's to handle: the result says so; the run goes on."""
    run_id = run_flow(cli, flow_writer, "claude", "env={'FAKE_AGENT_EXIT': '3'}")
    result = state_of(workspace, run_id)["agent"]["result"]
    assert result["exit_code"] == 3 and result["ok"] is False
    assert result["error"] == "done: tidy the README"  # is_error: the result text says why
    assert cli.json("show", run_id)["status"] == "completed"
    closed = next(e for e in events(workspace, run_id) if e["event"] == "session_closed")
    assert closed["exit_code"] == 3 and closed["error"]


def test_codex_session_links_the_rollout_codex_writes(
    cli: CLI, workspace: Path, flow_writer: Callable[[str, str], Path], agents: Path
) -> None:
    """`codex exec --json` runs; its rollout under ~/.codex/sessions/YYYY/MM/DD/ is linked."""
    run_id = run_flow(cli, flow_writer, "codex", "model='gpt-5-codex'")
    result = state_of(workspace, run_id)["agent"]["result"]
    assert result["text"] == "done: tidy the README" and result["exit_code"] == 0
    transcript = Path(result["transcript"])
    sessions = agents / ".codex" / "sessions"
    assert transcript.is_relative_to(sessions)
    year, month, day = transcript.relative_to(sessions).parts[:3]
    assert re.fullmatch(
        rf"rollout-{year}-{month}-{day}T\d\d-\d\d-\d\d-[0-9a-f-]{{36}}\.jsonl", transcript.name
    )
    meta = lines(transcript)[0]
    assert meta["type"] == "session_meta"
    assert transcript.name.endswith(f"-{meta['payload']['id']}.jsonl")  # type: ignore[index]

    link = workspace / ".flowdrop" / "runs" / run_id / "sessions" / "000001-codex.jsonl"
    assert Path(os.readlink(link)) == transcript
    opened = next(e for e in events(workspace, run_id) if e["event"] == "session_opened")
    assert opened["command"].startswith("codex exec --json --model gpt-5-codex")
    assert cli.json("show", run_id)["sessions"][0]["exists"] is True
    # The last running total; its input already includes the cached tokens.
    spent = {"input": 1001 + 5001, "output": 41, "cache_read": 5001, "cache_write": 0}
    assert cli.json("show", run_id)["usage"] == spent
    assert cli.json("runs", "agent")[0]["usage"] == spent


def test_codex_honours_codex_home(
    cli: CLI,
    workspace: Path,
    flow_writer: Callable[[str, str], Path],
    agents: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With CODEX_HOME set, the rollout is under it, and that is what is linked."""
    codex_home = tmp_path / "codex-home"
    codex_home.mkdir()
    monkeypatch.setenv("CODEX_HOME", str(codex_home))
    run_id = run_flow(cli, flow_writer, "codex", "")
    transcript = Path(state_of(workspace, run_id)["agent"]["result"]["transcript"])
    assert transcript.is_relative_to(codex_home / "sessions")
    assert not (agents / ".codex").exists()


def test_a_codex_session_that_writes_no_rollout_has_no_link(
    cli: CLI, workspace: Path, flow_writer: Callable[[str, str], Path], agents: Path
) -> None:
    """`--ephemeral` keeps no rollout: the session is recorded, its link shown missing."""
    run_id = run_flow(cli, flow_writer, "codex", "args=['--ephemeral']")
    result = state_of(workspace, run_id)["agent"]["result"]
    assert result["text"] == "done: tidy the README"
    assert result["transcript"] == "None" and result["link"] == "None"
    row = cli.json("show", run_id)["sessions"][0]
    assert row["link"] == "sessions/000001-codex.jsonl" and row["exists"] is False
    assert not (
        workspace / ".flowdrop" / "runs" / run_id / "sessions" / "000001-codex.jsonl"
    ).exists()


@pytest.mark.parametrize(
    ("backend", "product"), [("claude", "Claude Code"), ("codex", "OpenAI Codex")]
)
def test_a_cli_that_is_not_installed_is_a_clear_error(
    cli: CLI,
    workspace: Path,
    flow_writer: Callable[[str, str], Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    backend: str,
    product: str,
) -> None:
    """No CLI on PATH: session() raises a FlowdropError naming it; no session is opened,
    and a flow that does not catch it fails with that message (not a crash)."""
    bare = tmp_path / "bare-bin"
    bare.mkdir()
    git = shutil.which("git")
    assert git is not None
    (bare / "git").symlink_to(git)
    monkeypatch.setenv("PATH", str(bare))
    flow_writer(
        "careful",
        f"""
        import sys
        from flowdrop_tui import flow, FlowdropError

        @flow()
        def main(run):
            try:
                run.session({backend!r}, "hello")
            except FlowdropError as exc:
                run.session("command", [sys.executable, "-c", "pass"])
                return [type(exc).__name__, exc.code, str(exc)]
        """,
    )
    cli("run", "careful", check=0)
    run_id = str(cli.json("runs", "careful")[0]["run"])
    name, code, message = cli.json("show", run_id)["result"]
    assert name == "BackendUnavailableError" and code == "BACKEND_UNAVAILABLE"
    assert f"`{backend}`" in message and product in message and "not installed" in message
    # Nothing was opened for it: the next session is the run's first.
    opened = [e for e in events(workspace, run_id) if e["event"] == "session_opened"]
    assert [(e["backend"], e["link"]) for e in opened] == [
        ("command", "sessions/000001-command.log")
    ]

    flow_writer(
        "careless",
        f"from flowdrop_tui import flow\n\n@flow()\ndef main(run):\n"
        f"    run.session({backend!r}, 'hello')\n",
    )
    done = cli("run", "careless", check=1)
    assert f"`{backend}`" in done.stderr
    failed = cli.json("show", str(cli.json("runs", "careless")[0]["run"]))
    assert failed["status"] == "failed" and f"`{backend}`" in failed["error"]["message"]


@pytest.mark.parametrize("backend", ["claude", "codex"])
def test_stop_now_interrupts_an_agent_session_of_a_detached_run(
    cli: CLI,
    workspace: Path,
    flow_writer: Callable[[str, str], Path],
    agents: Path,
    monkeypatch: pytest.MonkeyPatch,
    backend: str,
) -> None:
    """`stop --now` during a session: the CLI (in the run's process group) takes the
    SIGINT and ends its own way (Claude Code exits 0, Codex 1: neither dies of it);
    the session is recorded interrupted because the run asked, the run ends
    cancelled, and the transcript written so far stays linked."""
    ready = workspace / f"{backend}-ready"
    monkeypatch.setenv("FAKE_AGENT_SLEEP", "120")
    monkeypatch.setenv("FAKE_AGENT_READY", str(ready))
    flow_writer(
        "slow",
        f"""
        from flowdrop_tui import flow

        @flow()
        def main(run):
            for n in run.rounds():
                run.state["round"] = n
                run.session({backend!r}, "a long task")
        """,
    )
    run_id = cli.json("run", "slow", "--detach")["run"]
    wait_for(lambda: ready.exists() and ready.read_text().strip())
    agent_pid = int(ready.read_text())
    assert os.getpgid(agent_pid) == os.getpgid(cli.json("show", run_id)["pid"])
    cli("stop", run_id, "--now", check=0)
    wait_for(lambda: cli.json("show", run_id)["status"] == "cancelled")

    closed = [e for e in events(workspace, run_id) if e["event"] == "session_closed"]
    assert len(closed) == 1 and closed[0]["interrupted"] is True
    assert closed[0]["exit_code"] == {"claude": 0, "codex": 1}[backend]
    assert closed[0]["error"].startswith("interrupted")
    assert [e["outcome"] for e in events(workspace, run_id) if e["event"] == "ended"] == [
        "cancelled"
    ]
    row = cli.json("show", run_id)["sessions"][0]
    assert row["interrupted"] is True and row["exists"] is True
    written = Path(row["target"]).read_text()
    assert "a long task" in written  # what the CLI wrote before it was stopped
    assert "done: a long task" not in written
    assert state_of(workspace, run_id)["slow"] == {"round": 1}
    wait_for(lambda: not _alive(agent_pid))


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split()[2] != "Z"
    except OSError:
        return False


def test_one_ctrl_c_at_a_terminal_interrupts_a_claude_session_that_exits_0(
    workspace: Path,
    cli: CLI,
    flow_writer: Callable[[str, str], Path],
    agents: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """One Ctrl-C at a terminal reaches the whole foreground group: Claude Code stops
    and exits 0 with no answer. The session is interrupted (the run took the SIGINT
    while it ran), not ok, and the run stops after that round, cancelled."""
    ready = workspace / "claude-ready"
    monkeypatch.setenv("FAKE_AGENT_SLEEP", "120")
    monkeypatch.setenv("FAKE_AGENT_READY", str(ready))
    flow_writer(
        "slow",
        """
        from flowdrop_tui import flow

        @flow()
        def main(run):
            for n in run.rounds():
                result = run.session("claude", "a long task")
                run.state["result"] = {"ok": result.ok, "text": result.text,
                                       "interrupted": result.interrupted}
        """,
    )
    run = subprocess.Popen(
        [sys.executable, "-m", "flowdrop_tui", "run", "slow"],
        cwd=workspace,
        start_new_session=True,  # its own group, as a terminal's foreground job
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for(lambda: ready.exists() and ready.read_text().strip())
        os.killpg(run.pid, signal.SIGINT)  # what one Ctrl-C at the terminal sends
        run.wait(timeout=60)
    finally:
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGKILL)
            run.wait()
    run_id = str(cli.json("runs", "slow")[0]["run"])
    [closed] = [e for e in events(workspace, run_id) if e["event"] == "session_closed"]
    assert closed["exit_code"] == 0 and closed["interrupted"] is True
    assert state_of(workspace, run_id)["slow"]["result"] == {
        "ok": False,
        "text": "",
        "interrupted": True,
    }
    assert cli.json("show", run_id)["status"] == "cancelled"


def test_flows_shows_what_a_thread_spent_since_its_chain_began(
    cli: CLI, workspace: Path, flow_writer: Callable[[str, str], Path], agents: Path
) -> None:
    """`flows --json` adds up the thread's usage along the runs picked up one from
    another (a called flow's along its own chain); `--fresh` begins a new chain,
    counted from nothing; `runs` is per run. Each run records what its chain spent
    before it (`chain_usage`), so this reads one record per flow."""
    flow_writer(
        "agent",
        """
        from flowdrop_tui import flow

        @flow(resumable=True)
        def main(run):
            run.state["runs"] = run.state.get("runs", 0) + 1
            run.session("claude", "one more time")
            run.call("helper")
        """,
    )
    flow_writer(
        "helper",
        """
        from flowdrop_tui import flow

        @flow(resumable=True)
        def main(run):
            run.state["calls"] = run.state.get("calls", 0) + 1
            run.session("claude", "help")
        """,
    )
    one = {"input": 1001 + 5001 + 301, "output": 41, "cache_read": 5001, "cache_write": 301}

    def times(n: int) -> dict[str, int]:
        return {k: v * n for k, v in one.items()}

    def flow_usage(name: str) -> object:
        return next(f for f in cli.json("flows") if f["name"] == name)["usage"]

    cli("run", "agent", check=0)
    assert flow_usage("agent") == one and flow_usage("helper") == one
    cli("run", "agent", check=0)  # picks the thread up
    runs = cli.json("runs", "agent")
    assert runs[0]["picked_up_from"] == runs[1]["run"]
    assert [r["usage"] for r in runs] == [times(2), times(2)]  # its session and the call's
    created = next(e for e in events(workspace, runs[0]["run"]) if e["event"] == "created")
    assert created["chain_usage"] == one
    assert flow_usage("agent") == times(2) and flow_usage("helper") == times(2)
    cli("run", "agent", "--fresh", check=0)
    assert flow_usage("agent") == one
    assert "USAGE" in cli("flows", check=0).stdout
