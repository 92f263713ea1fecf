"""Sessions with the `command` backend, their links, and the git facts of a run (SPEC §9, §11)."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from pathlib import Path

from tests.conftest import CLI, events, state_of, wait_for

GIT = "git -c user.name=Flow -c user.email=flow@example.com"


def run_id_of(cli: CLI, flow: str) -> str:
    rows = cli.json("runs", flow)
    assert rows, f"no run of {flow}"
    return str(rows[0]["run"])


def test_a_session_per_round_links_its_transcript_and_show_lists_the_commits(
    cli: CLI, workspace: Path, flow_writer: Callable[[str, str], Path]
) -> None:
    """The issue's "done when": one link per session resolving to a transcript that holds
    the output, and `show --json` listing the commits the run made, in order."""
    flow_writer(
        "notes",
        f"""
        from flowdrop_tui import flow

        @flow(description="a note per round, committed")
        def main(run):
            for n in run.rounds(range(3)):
                result = run.session(
                    "command",
                    f"echo note {{n}} > note-{{n}}.txt && git add note-{{n}}.txt && "
                    f"{GIT} commit -q -m 'round {{n}} note' && echo committed round {{n}} "
                    f"&& echo to-stderr {{n}} >&2",
                    shell=True,
                )
                run.state[f"exit_{{n}}"] = result.exit_code
                run.state[f"text_{{n}}"] = result.text
            return "three notes"
        """,
    )
    start_head = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=workspace, capture_output=True, text=True, check=True
    ).stdout.strip()
    cli("run", "notes", check=0)
    run_id = run_id_of(cli, "notes")
    run_dir = workspace / ".flowdrop" / "runs" / run_id

    links = sorted(os.listdir(run_dir / "sessions"))
    assert links == ["000001-command.log", "000002-command.log", "000003-command.log"]
    for n, name in enumerate(links):
        link = run_dir / "sessions" / name
        assert link.is_symlink()
        transcript = Path(os.path.realpath(link))
        assert transcript.parent == workspace / ".flowdrop" / "transcripts"
        text = transcript.read_text()
        assert f"committed round {n}" in text and f"to-stderr {n}" in text
    state = state_of(workspace, run_id)["notes"]
    assert state["exit_0"] == 0 and "committed round 2" in state["text_2"]

    detail = cli.json("show", run_id)
    assert [s["link"] for s in detail["sessions"]] == [f"sessions/{name}" for name in links]
    assert all(s["backend"] == "command" and s["exists"] for s in detail["sessions"])
    assert [s["exit_code"] for s in detail["sessions"]] == [0, 0, 0]
    git = detail["git"]
    assert git["start"]["head"] == start_head and git["start"]["branch"] == "main"
    assert [c["summary"] for c in git["commits"]] == [f"round {n} note" for n in range(3)]
    assert all(c["author"] == "Flow" and c["time"] and len(c["sha"]) == 40 for c in git["commits"])
    assert git["end"]["head"] == git["commits"][-1]["sha"]

    shown = cli("show", run_id, check=0).stdout
    assert "round 2 note" in shown and "sessions/000003-command.log" in shown

    opened = [e for e in events(workspace, run_id) if e["event"] == "session_opened"]
    closed = [e for e in events(workspace, run_id) if e["event"] == "session_closed"]
    assert [e["round"] for e in opened] == [1, 2, 3]
    assert all(e["key"] == "notes" and "git add" in e["command"] for e in opened)
    assert [e["interrupted"] for e in closed] == [False, False, False]
    assert [e["session"] for e in closed] == [e["session"] for e in opened]


def test_a_deleted_transcript_shows_as_missing_never_an_error(
    cli: CLI, workspace: Path, flow_writer: Callable[[str, str], Path]
) -> None:
    """Agents' retention deletes transcripts: `show` must report it, not fail on it."""
    flow_writer(
        "echo",
        """
        from flowdrop_tui import flow

        @flow()
        def main(run):
            run.session("command", ["echo", "one"])
            run.session("command", ["echo", "two"])
        """,
    )
    cli("run", "echo", check=0)
    run_id = run_id_of(cli, "echo")
    first = workspace / ".flowdrop" / "runs" / run_id / "sessions" / "000001-command.log"
    Path(os.path.realpath(first)).unlink()
    detail = cli.json("show", run_id)
    assert [s["exists"] for s in detail["sessions"]] == [False, True]
    assert detail["sessions"][0]["target"].endswith("-000001.log")
    assert "[missing]" in cli("show", run_id, check=0).stdout


def test_git_is_null_outside_a_repository(cli: CLI, tmp_path: Path) -> None:
    """A workspace that is not a git repository has no git facts, and sessions still work."""
    plain = tmp_path / "plain"
    (plain / "flows" / "hello").mkdir(parents=True)
    (plain / "flows" / "hello" / "flow.py").write_text(
        "from flowdrop_tui import flow\n\n"
        "@flow()\n"
        "def main(run):\n"
        "    return run.session('command', ['echo', 'hi']).text\n"
    )
    cli("--workspace", str(plain), "run", "hello", check=0)
    rows = cli.json("--workspace", str(plain), "runs")
    detail = cli.json("--workspace", str(plain), "show", rows[0]["run"])
    assert detail["git"] is None
    assert detail["result"] == "hi\n"
    assert detail["sessions"][0]["exists"] is True


def test_commits_after_a_pause_are_not_the_paused_runs(
    cli: CLI, workspace: Path, flow_writer: Callable[[str, str], Path]
) -> None:
    """A paused run recorded no end: commits made later by someone else are not its own."""
    flow_writer(
        "pauser",
        f"""
        from flowdrop_tui import flow
        from flowdrop_tui.core.control import verbs
        from flowdrop_tui.core.paths import Layout

        @flow()
        def main(run):
            for n in run.rounds(range(2)):
                run.session("command", f"touch p{{n}} && git add p{{n}} && "
                            f"{GIT} commit -q -m 'paused run {{n}}'", shell=True)
                if n == 0:
                    verbs.pause(Layout(run.workspace), run.run_id)
        """,
    )
    cli("run", "pauser", check=0)
    run_id = run_id_of(cli, "pauser")
    assert cli.json("show", run_id)["status"] == "paused"
    env = {**os.environ, "GIT_COMMITTER_DATE": "2099-01-01T00:00:00Z"}
    subprocess.run(
        [*GIT.split(), "commit", "-q", "--allow-empty", "-m", "someone else, later"],
        cwd=workspace,
        check=True,
        env=env,
    )
    summaries = [c["summary"] for c in cli.json("show", run_id)["git"]["commits"]]
    assert summaries == ["paused run 0"]

    cli("resume", run_id, check=0)
    detail = cli.json("show", run_id)
    assert detail["status"] == "completed"
    links = sorted(os.listdir(workspace / ".flowdrop" / "runs" / run_id / "sessions"))
    assert links == ["000001-command.log", "000002-command.log"]  # numbering goes on
    assert len({s["session"] for s in detail["sessions"]}) == 2


SLEEPER = """
from flowdrop_tui import flow

@flow()
def main(run):
    for n in run.rounds():
        run.state["round"] = n
        run.session("command", "echo first-output; echo $$ > {ready} && exec sleep 120", shell=True)
"""


def test_stop_now_interrupts_a_command_session_of_a_detached_run(
    cli: CLI, workspace: Path, flow_writer: Callable[[str, str], Path]
) -> None:
    """`stop --now` reaches the session's process (the run's group), the session is
    recorded as interrupted and the run ends cancelled (SPEC §10). Until then the
    transcript fills as the output arrives, and `show` lists the session as open."""
    ready = workspace / "ready"
    flow_writer("sleeper", SLEEPER.format(ready=ready))
    run_id = cli.json("run", "sleeper", "--detach")["run"]
    wait_for(lambda: ready.exists() and ready.read_text().strip())
    sleeper = int(ready.read_text())
    [row] = cli.json("show", run_id)["sessions"]
    assert row["closed"] is False and Path(row["target"]).read_text() == "first-output\n"

    cli("stop", run_id, "--now", check=0)
    wait_for(lambda: cli.json("show", run_id)["status"] == "cancelled")
    closed = [e for e in events(workspace, run_id) if e["event"] == "session_closed"]
    assert closed and closed[-1]["interrupted"] is True
    assert closed[-1]["exit_code"] == -2  # the sleep died of SIGINT
    ended = [e for e in events(workspace, run_id) if e["event"] == "ended"]
    assert ended[-1]["outcome"] == "cancelled"
    assert not _alive(sleeper)
    detail = cli.json("show", run_id)
    assert detail["sessions"][0]["interrupted"] is True
    assert state_of(workspace, run_id)["sleeper"] == {"round": 1}


def test_stop_now_reaches_a_session_when_the_run_does_not_lead_its_group(
    cli: CLI, workspace: Path, flow_writer: Callable[[str, str], Path]
) -> None:
    """A foreground run started by another program shares that program's process group:
    `stop --now` signals the run alone, and the run passes the SIGINT on to its session."""
    ready = workspace / "ready"
    flow_writer("sleeper", SLEEPER.format(ready=ready))
    child = cli.start("run", "sleeper")
    try:
        wait_for(lambda: ready.exists() and ready.read_text().strip())
        sleeper = int(ready.read_text())
        assert os.getpgid(child.pid) == os.getpgrp()  # the test runner's group, not its own
        run_id = run_id_of(cli, "sleeper")
        cli("stop", run_id, "--now", check=0)
        assert child.wait(timeout=30) == 130
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    closed = [e for e in events(workspace, run_id) if e["event"] == "session_closed"]
    assert closed[-1]["interrupted"] is True and closed[-1]["exit_code"] == -2
    assert not _alive(sleeper)


def test_bad_session_calls_are_clear_errors(
    cli: CLI, workspace: Path, flow_writer: Callable[[str, str], Path]
) -> None:
    """An unknown backend or option fails the run with a message, and opens no session."""
    flow_writer(
        "typo",
        """
        from flowdrop_tui import flow, FlowdropError

        @flow()
        def main(run):
            problems = []
            for call in (lambda: run.session("nope", "x"),
                         lambda: run.session("command", ["true"], shel=True),
                         lambda: run.session("command", [])):
                try:
                    call()
                except FlowdropError as exc:
                    problems.append(str(exc))
            return problems
        """,
    )
    cli("run", "typo", check=0)
    run_id = run_id_of(cli, "typo")
    unknown, option, empty = cli.json("show", run_id)["result"]
    assert "unknown session backend 'nope'" in unknown and "command" in unknown
    assert "shel" in option and "shell" in option
    assert "non-empty list" in empty
    assert not [e for e in events(workspace, run_id) if e["event"].startswith("session_")]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie still answers kill(0); it has exited all the same.
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split()[2] != "Z"
    except OSError:
        return False
