"""The real ``flowdrop-tui`` in a real terminal (tmux): a run launched with enter fails,
and its traceback's last lines are on screen, in the Run pane (docs/decisions.md,
"What a run printed")."""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.conftest import CLI, wait_for
from tests.tui.test_tmux import Tmux

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")

FAILING = """
    from flowdrop_tui import flow

    def parse(text):
        return int(text)

    @flow(description="prints, then fails")
    def main(run):
        for item in run.rounds(["1", "2", "x"]):
            print("parsing", item)
            run.state["last"] = parse(item)
"""


@pytest.fixture
def terminal(tmp_path: Path) -> Iterator[Tmux]:
    session = Tmux(tmp_path / "tmux.sock")
    yield session
    session.close()


def run_pane(screen: str) -> str:
    """The right-hand column of the bottom panes: the Run pane's text, line by line."""
    return "\n".join(line[72:] for line in screen.splitlines())


def test_a_failed_runs_traceback_is_on_screen(
    workspace: Path, flow_writer: Callable[[str, str], Path], cli: CLI, terminal: Tmux
) -> None:
    """Guards the repro: a failed run showed a one-line error and nothing it printed."""
    flow_writer("boom", FAILING)
    command = f"{shlex.quote(sys.executable)} -m flowdrop_tui; sleep 60"
    env_path = shlex.quote(os.environ.get("PATH", ""))
    terminal.start(
        f"env -u COLUMNS -u LINES PATH={env_path} TERM=xterm-256color {command}", workspace
    )
    wait_for(lambda: "Runs of boom" in terminal.screen(), timeout=60)
    terminal.keys("Enter")
    wait_for(lambda: cli.json("runs") != [] and cli.json("runs")[0]["status"] == "failed")
    # The traceback's last lines, followed to the bottom of the Run pane.
    wait_for(lambda: "ValueError: invalid literal" in run_pane(terminal.screen()), timeout=30)
    wait_for(lambda: "return int(text)" in run_pane(terminal.screen()), timeout=30)
