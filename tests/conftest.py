"""Shared fixtures: real git workspaces in tmp_path and a way to run the real CLI."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from tests.waiting import wait_for

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture
def workspace(tmp_path: Path) -> Iterator[Path]:
    """An empty git repository with one commit and a flows/ folder."""
    ws = tmp_path / "ws"
    ws.mkdir()
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@t",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@t",
    }
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=ws, check=True, env=env)
    subprocess.run(
        ["git", "commit", "-q", "--allow-empty", "-m", "init"], cwd=ws, check=True, env=env
    )
    (ws / "flows").mkdir()
    yield ws
    kill_live_runs(ws)  # a test that failed halfway leaves no run behind


def write_flow(ws: Path, name: str, body: str) -> Path:
    """Write flows/<name>/flow.py from an indented snippet."""
    folder = ws / "flows" / name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "flow.py").write_text(textwrap.dedent(body).lstrip())
    return folder


@pytest.fixture
def flow_writer(workspace: Path) -> Callable[[str, str], Path]:
    return lambda name, body: write_flow(workspace, name, body)


class CLI:
    """The real ``flowdrop-tui`` command, run as a child process in a workspace."""

    def __init__(self, ws: Path) -> None:
        self.ws = ws

    def __call__(
        self, *args: str, timeout: float = 60, cwd: Path | None = None, check: int | None = None
    ) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [sys.executable, "-m", "flowdrop_tui", *args],
            cwd=cwd or self.ws,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if check is not None:
            assert done.returncode == check, (done.returncode, done.stdout, done.stderr)
        return done

    def json(self, *args: str, check: int | None = 0) -> Any:
        done = self(*args, "--json", check=check)
        return orjson.loads(done.stdout)

    def start(self, *args: str) -> subprocess.Popen[str]:
        return subprocess.Popen(
            [sys.executable, "-m", "flowdrop_tui", *args],
            cwd=self.ws,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )


@pytest.fixture
def cli(workspace: Path) -> CLI:
    return CLI(workspace)


def events(ws: Path, run_id: str) -> list[dict[str, Any]]:
    path = ws / ".flowdrop" / "runs" / run_id / "cycle.jsonl"
    out = []
    for line in path.read_bytes().splitlines():
        try:
            out.append(orjson.loads(line))
        except orjson.JSONDecodeError:
            pass
    return out


def state_of(ws: Path, run_id: str) -> Any:
    """The run's state as saved (its log while it has one: records/flow_state/state_log.py)."""
    from flowdrop_tui.core.records.flow_state.state import read_run_states

    return read_run_states(ws / ".flowdrop" / "runs" / run_id)


def kill_live_runs(ws: Path) -> list[str]:
    """SIGKILL the process group of every run still live in ``ws``; their ids.

    Detached runs outlive the test that started them (that is the product); a test
    that fails halfway must not leave one running for the rest of the session.
    """
    from flowdrop_tui.core.files import locks

    killed = []
    for lock in sorted((ws / ".flowdrop" / "runs").glob("*/live.lock")):
        pid = locks.holder_pid(lock)
        if pid is None:
            continue
        try:
            os.killpg(pid, signal.SIGKILL) if os.getpgid(pid) == pid else os.kill(pid, 9)
        except ProcessLookupError:
            continue
        killed.append(lock.parent.name)
    return killed


def paused_mid_run(ws: Path, cli: CLI, name: str, body: str) -> str:
    """Start flow ``name`` (``body`` waits at each round's end while ``ws/hold`` exists)
    detached, pause it while a round is certainly in flight, and return its id once
    it is paused — however slow the machine, the batch cannot finish first."""
    write_flow(ws, name, body)
    gate = ws / "hold"
    gate.write_text("")
    run_id = str(cli.json("run", name, "--detach")["run"])
    wait_for(lambda: any(e["event"] == "round_started" for e in events(ws, run_id)))
    cli("pause", run_id, check=0)
    gate.unlink()
    wait_for(lambda: cli.json("show", run_id)["status"] == "paused")
    return run_id


# -- the servers of remote mode (tests/remote, tests/contract) ----------------------------
# One PostgreSQL and one Temporal dev server per test session (per xdist worker), here so
# both folders share them. Only their tests ask for them: nothing starts otherwise.
from tests.remote.servers import PostgresServer  # noqa: E402
from tests.remote.temporal_server import temporal_server  # noqa: E402, F401


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    server = PostgresServer.start()
    try:
        yield server
    finally:
        server.stop()
