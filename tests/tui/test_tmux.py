"""The real ``flowdrop-tui`` in a real terminal (tmux): enter, escape twice, cancelled;
escape never closes a paused run; a burst ``/name⏎⏎`` launches the flow named; 80×24."""

from __future__ import annotations

import os
import secrets
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.conftest import CLI, events, paused_mid_run, wait_for
from tests.flow_bodies import (
    ITEMS_HELD_BY_GATE,
    LOGS_A_TICK_EVERY_TENTH,
    ONE_LONG_ROUND,
    RETURNS_AT_ONCE,
)

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")


class Tmux:
    """One detached tmux session of its own (its own server socket, too)."""

    def __init__(self, socket: Path) -> None:
        self.base = ["tmux", "-S", str(socket)]
        self.name = f"fd-{secrets.token_hex(3)}"

    def run(self, *args: str) -> str:
        done = subprocess.run([*self.base, *args], capture_output=True, text=True, timeout=30)
        return done.stdout

    def start(self, command: str, cwd: Path, size: tuple[int, int] = (120, 36)) -> None:
        width, height = (str(n) for n in size)
        self.run(
            "new-session", "-d", "-s", self.name, "-x", width, "-y", height, "-c", str(cwd), command
        )

    def screen(self) -> str:
        return self.run("capture-pane", "-p", "-t", self.name)

    def keys(self, *keys: str) -> None:
        self.run("send-keys", "-t", self.name, *keys)

    def close(self) -> None:
        self.run("kill-server")


def open_ui(tmux: Tmux, workspace: Path, size: tuple[int, int] = (120, 36), env: str = "") -> None:
    command = f"{shlex.quote(sys.executable)} -m flowdrop_tui; sleep 60"
    env_path = shlex.quote(os.environ.get("PATH", ""))
    # COLUMNS/LINES from the test runner would pin the app to their size, not the pane's.
    tmux.start(
        f"env -u COLUMNS -u LINES PATH={env_path} TERM=xterm-256color {env} {command}",
        workspace,
        size,
    )


@pytest.fixture
def tmux(tmp_path: Path) -> Iterator[Tmux]:
    session = Tmux(tmp_path / "tmux.sock")
    yield session
    session.close()


def test_enter_then_escape_twice_ends_the_run_cancelled(
    workspace: Path, flow_writer: Callable[[str, str], Path], cli: CLI, tmux: Tmux
) -> None:
    """Guards the whole path a user takes: the real command, real keys, a real run."""
    flow_writer("slow", ONE_LONG_ROUND)
    open_ui(tmux, workspace)
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


def test_at_80x24_escapes_never_close_a_paused_run_and_x_asks_first(
    workspace: Path, cli: CLI, tmux: Tmux
) -> None:
    """Guards "Escape never closes a paused run" (docs/decisions.md,
    "The terminal UI's keys") in the real terminal, at 80×24: ``/held`` then escape after
    escape leaves the paused run paused; ``x`` opens a question naming it, and escape
    there keeps it. The footer fits."""
    run_id = paused_mid_run(workspace, cli, "held", ITEMS_HELD_BY_GATE)
    open_ui(tmux, workspace, (80, 24))
    wait_for(lambda: "Runs of held" in tmux.screen() and run_id in tmux.screen(), timeout=60)
    screen = tmux.screen()
    assert "1 paused: held" in screen
    assert screen.rstrip().splitlines()[-1].rstrip().endswith("q Quit")  # the footer fits
    tmux.keys("/", "held")
    wait_for(lambda: "filter flows" in tmux.screen())
    tmux.keys("Escape", "Escape", "Escape")
    wait_for(lambda: "escape leaves it so" in tmux.screen())
    tmux.keys("Escape", "Escape")
    time.sleep(0.5)  # a key right after escape reads as alt+key in any terminal
    tmux.keys("x")
    wait_for(lambda: "Close paused run" in tmux.screen() and "Keep it paused" in tmux.screen())
    tmux.keys("Escape", "Escape", "Escape")
    wait_for(lambda: "Close paused run" not in tmux.screen())
    time.sleep(1.0)  # anything the escapes could have asked would be recorded by now
    assert cli.json("show", run_id)["status"] == "paused"
    assert not any(ev["event"] == "stop_requested" for ev in events(workspace, run_id))


def test_a_burst_slash_name_enter_enter_launches_the_flow_named(
    workspace: Path,
    flow_writer: Callable[[str, str], Path],
    cli: CLI,
    tmux: Tmux,
    tmp_path: Path,
) -> None:
    """Guards items 2 and 3 with real keys: tmux delivers ``/bravo⏎⏎`` as one burst
    while a live run streams events; the flow launched is bravo, and its run shows
    under the kept filter. Then ``o`` hands the terminal to $PAGER on its state.json."""
    for name in ("alpha", "bravo"):
        flow_writer(name, RETURNS_AT_ONCE)
    flow_writer("ticker", LOGS_A_TICK_EVERY_TENTH)
    ticker = str(cli.json("run", "ticker", "--detach")["run"])
    opened = tmp_path / "opened"
    pager = tmp_path / "pager"
    pager.write_text(f'#!/bin/sh\necho "$1" > {shlex.quote(str(opened))}\n')
    pager.chmod(0o755)
    open_ui(tmux, workspace, (80, 24), env=f"PAGER={shlex.quote(str(pager))}")
    wait_for(lambda: "ticker" in tmux.screen() and "Runs of alpha" in tmux.screen(), timeout=60)
    tmux.keys("Down", "Down")  # the ticker: its events stream under the cursor
    wait_for(lambda: "tick" in tmux.screen())
    tmux.keys("/bravo", "Enter", "Enter")
    wait_for(lambda: len(cli.json("runs")) == 2, timeout=60)
    launched = [run for run in cli.json("runs") if run["run"] != ticker]
    assert [run["flow"] for run in launched] == ["bravo"]
    wait_for(lambda: launched[0]["run"] in tmux.screen() and "filter: bravo" in tmux.screen())
    assert "alpha" not in tmux.screen().split("Runs of")[0]  # the filter is kept
    tmux.keys("o")
    wait_for(lambda: opened.exists() and opened.read_text().strip() != "")
    assert opened.read_text().strip().endswith(f"{launched[0]['run']}/state.json")
    wait_for(lambda: "Runs of bravo" in tmux.screen())  # the screen is back
    assert cli.json("show", ticker)["status"] == "running"
