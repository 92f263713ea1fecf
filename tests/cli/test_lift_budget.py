"""Issue 35 item 4: lifting a budget with ``none`` on the command line says once what it
means and needs a second word — ``y`` on a terminal, else ``--yes`` — real processes."""

from __future__ import annotations

import os
import pty
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from tests.conftest import CLI, wait_for

CAPPED = """
    from flowdrop_tui import flow

    @flow(resumable=True, budget={"rounds": 2})
    def main(run):
        for n in run.rounds():
            run.state["n"] = n
            if n == 4:
                return n
"""
WORDS = "no limit on rounds: the loop runs until it stops itself or you stop it"


def paused_on_budget(cli: CLI, flow_writer: Callable[[str, str], Path]) -> str:
    flow_writer("capped", CAPPED)
    cli("run", "capped", check=0)
    run_id = str(cli.json("runs")[0]["run"])
    assert cli.json("show", run_id)["status"] == "paused"
    return run_id


def test_resume_max_rounds_none_is_refused_without_yes_off_a_terminal(
    workspace: Path, cli: CLI, flow_writer: Callable[[str, str], Path]
) -> None:
    """``resume RUN --max-rounds none`` from a script resumed at once, unbounded; now it
    is refused (exit 2, nothing started) naming what it means, and ``--yes`` lifts it.
    ``run --max-rounds none`` takes the same second word."""
    run_id = paused_on_budget(cli, flow_writer)
    refused = cli.json("resume", run_id, "--max-rounds", "none", check=2)
    assert refused["error"]["code"] == "USAGE"
    assert WORDS in refused["error"]["message"] and "--yes" in refused["error"]["message"]
    said = cli("resume", run_id, "--max-rounds", "none", check=2).stderr
    assert WORDS in said
    assert cli.json("show", run_id)["status"] == "paused"  # nothing ran
    done = cli.json("resume", run_id, "--max-rounds", "none", "--yes")
    assert (done["status"], done["result"]) == ("completed", 4)
    refused = cli.json("run", "capped", "--fresh", "--max-rounds", "none", check=2)
    assert WORDS in refused["error"]["message"]


def test_on_a_terminal_resume_max_rounds_none_asks_and_y_lifts_it(
    workspace: Path, cli: CLI, flow_writer: Callable[[str, str], Path]
) -> None:
    """A person at a terminal is asked once, on stderr; anything but ``y`` keeps the
    budget (nothing started), ``y`` resumes without a limit."""
    run_id = paused_on_budget(cli, flow_writer)

    def at_a_terminal(reply: bytes) -> tuple[int, str]:
        leader, follower = pty.openpty()
        child = subprocess.Popen(
            [sys.executable, "-m", "flowdrop_tui", "resume", run_id, "--max-rounds", "none"],
            cwd=workspace,
            stdin=follower,
            stdout=subprocess.PIPE,
            stderr=follower,
        )
        os.close(follower)
        heard = b""
        while b"[y/N]" not in heard:
            heard += os.read(leader, 1024)
        os.write(leader, reply)
        status = child.wait(timeout=60)
        try:
            while chunk := os.read(leader, 4096):
                heard += chunk
        except OSError:  # the terminal closed with the child
            pass
        os.close(leader)
        return status, heard.decode(errors="replace")

    status, heard = at_a_terminal(b"n\n")
    assert status == 2 and WORDS in heard and "the budget stays" in heard, heard
    assert cli.json("show", run_id)["status"] == "paused"
    status, heard = at_a_terminal(b"y\n")
    assert status == 0, heard
    wait_for(lambda: cli.json("show", run_id)["status"] == "completed")
