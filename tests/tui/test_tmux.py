"""The real ``flowdrop-tui`` in a real terminal (tmux): enter, escape twice, cancelled."""

from __future__ import annotations

import os
import secrets
import shlex
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.conftest import CLI, events, wait_for

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")

SLOW = """
    import time
    from flowdrop_tui import flow

    @flow(resumable=True, description="one long round")
    def main(run):
        for round in run.rounds():
            run.state["n"] = round
            time.sleep(120)
"""


class Tmux:
    """One detached tmux session of its own (its own server socket, too)."""

    def __init__(self, socket: Path) -> None:
        self.base = ["tmux", "-S", str(socket)]
        self.name = f"fd-{secrets.token_hex(3)}"

    def run(self, *args: str) -> str:
        done = subprocess.run([*self.base, *args], capture_output=True, text=True, timeout=30)
        return done.stdout

    def start(self, command: str, cwd: Path) -> None:
        self.run(
            "new-session", "-d", "-s", self.name, "-x", "120", "-y", "36", "-c", str(cwd), command
        )

    def screen(self) -> str:
        return self.run("capture-pane", "-p", "-t", self.name)

    def keys(self, *keys: str) -> None:
        self.run("send-keys", "-t", self.name, *keys)

    def close(self) -> None:
        self.run("kill-server")


@pytest.fixture
def tmux(tmp_path: Path) -> Iterator[Tmux]:
    session = Tmux(tmp_path / "tmux.sock")
    yield session
    session.close()


def test_enter_then_escape_twice_ends_the_run_cancelled(
    workspace: Path, flow_writer: Callable[[str, str], Path], cli: CLI, tmux: Tmux
) -> None:
    """Guards the whole path a user takes: the real command, real keys, a real run."""
    flow_writer("slow", SLOW)
    command = f"{shlex.quote(sys.executable)} -m flowdrop_tui; sleep 60"
    env_path = shlex.quote(os.environ.get("PATH", ""))
    # COLUMNS/LINES from the test runner would pin the app to their size, not the pane's.
    tmux.start(f"env -u COLUMNS -u LINES PATH={env_path} TERM=xterm-256color {command}", workspace)
    wait_for(lambda: "slow" in tmux.screen() and "Runs of slow" in tmux.screen(), timeout=60)
    tmux.keys("Enter")
    wait_for(lambda: cli.json("runs") != [], timeout=60)
    run_id = cli.json("runs")[0]["run"]
    wait_for(lambda: any(ev["event"] == "round_started" for ev in events(workspace, run_id)))
    wait_for(lambda: "round_started" in tmux.screen())  # its events are on screen
    tmux.keys("Escape")
    wait_for(lambda: "escape again" in tmux.screen())  # the toast may wrap the rest
    assert cli.json("runs")[0]["status"] == "running"  # after the round: it goes on
    tmux.keys("Escape")
    wait_for(lambda: cli.json("runs")[0]["status"] == "cancelled", timeout=30)
    stops = [ev["now"] for ev in events(workspace, run_id) if ev["event"] == "stop_requested"]
    assert stops == [False, True]
    wait_for(lambda: "stopped after" in tmux.screen())
