"""The contract suite: the same tests against local mode and remote mode (issue 21).

``mode`` is parametrised over ``local`` (always) and ``remote`` (marked ``remote``): a
fresh client workspace — a clone of a bare git origin, its flows committed and pushed —
driven only through the real CLI and its ``--json`` answers. In remote mode the
workspace is configured for this module's cluster (``.flowdrop/config.toml``): the
session's PostgreSQL and Temporal dev server (``tests/conftest.py``) and one real
``flowdrop-tui worker`` on a task queue of its own, shared by the module's tests, each
test in a space of its own.

Where remote mode's servers cannot be started (no PostgreSQL, no ``temporal`` binary),
the remote param is skipped saying why — or fails where ``FLOWDROP_REQUIRE_REMOTE=1``
or ``FLOWDROP_REQUIRE_NETNS=1`` (``.ci/run``) says they must run.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest

from tests.conftest import kill_live_runs
from tests.remote.cluster import Cluster, make_client, wait_for
from tests.remote.git_origin import commit_all, make_origin
from tests.remote.servers import new_space

REQUIRE_ENVS = ("FLOWDROP_REQUIRE_REMOTE", "FLOWDROP_REQUIRE_NETNS")
DEADLINE = 120.0  # seconds to wait on a condition: the machine may be loaded


def remote_required() -> bool:
    return any(os.environ.get(name) for name in REQUIRE_ENVS)


def gated(gate: Path) -> str:
    """A flow that runs for ever, round N printing ``round N`` then waiting for the
    file ``gate/go-N``: the test says when each round ends, so a request always lands
    while a round is in flight, in either mode (the gate is a path on this machine)."""
    return f"""
    import time
    from pathlib import Path
    from flowdrop_tui import flow

    GATE = Path({str(gate)!r})

    @flow(resumable=True, description="rounds held by a gate")
    def main(run):
        for r in run.rounds():
            run.state["round"] = r
            print(f"round {{r}}", flush=True)
            while not (GATE / f"go-{{r}}").exists():
                time.sleep(0.05)
"""


@dataclass
class Mode:
    """A client workspace in one mode, and its CLI."""

    name: str  # "local" | "remote"
    ws: Path
    gate: Path  # where ``gated`` flows look for their go-N files

    def cli(self, *args: str, timeout: float = DEADLINE) -> subprocess.CompletedProcess[str]:
        """``flowdrop-tui --workspace WS ARGS`` in the workspace, with no FLOWDROP_*
        setting from the environment: the mode is the workspace's own."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("FLOWDROP_")}
        return subprocess.run(
            [sys.executable, "-m", "flowdrop_tui", "--workspace", str(self.ws), *args],
            cwd=self.ws,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    def json(self, *args: str, code: int = 0) -> Any:
        """The JSON answer of ``ARGS --json``, which must exit ``code``."""
        done = self.cli(*args, "--json")
        assert done.returncode == code, (
            f"[{self.name}] {args} exited {done.returncode}, not {code}:\n"
            f"{done.stdout}{done.stderr}"
        )
        return orjson.loads(done.stdout)

    def after_end(self, *args: str, code: int = 0) -> Any:
        """``json(ARGS)`` for a start of a key whose last run has just been seen ended.

        In remote mode the key's workflow stays open a moment after its run's end is
        in the records (the worker sees its child exit on its next beat; a CLOSE's
        workflow completes a moment after answering). A start in that moment must
        wait for it, never be refused ALREADY_RUNNING, which local mode never says of
        an ended run: asked once, as a user would."""
        return self.json(*args, code=code)

    def refused(self, *args: str, exit_code: int = 3, after_end: bool = False) -> str:
        """The error code of a refused ``ARGS --json`` (exit ``exit_code``);
        ``after_end``: a start just after the key's run ended (see ``after_end``)."""
        answer = (self.after_end if after_end else self.json)(*args, code=exit_code)
        assert set(answer) == {"error"} and set(answer["error"]) == {"code", "message"}
        assert answer["error"]["message"], answer
        return str(answer["error"]["code"])

    def add_flow(self, name: str, body: str) -> None:
        """flows/<name>/flow.py, committed and pushed (a worker runs the pushed HEAD)."""
        folder = self.ws / "flows" / name
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "flow.py").write_text(textwrap.dedent(body).lstrip())
        commit_all(self.ws, f"flow {name}")

    def add_gated(self, name: str = "gated") -> None:
        self.add_flow(name, gated(self.gate))

    def go(self, round: int) -> None:
        """Let round ``round`` of the gated flows end."""
        (self.gate / f"go-{round}").touch()

    def show(self, run: str) -> dict[str, Any]:
        shown: dict[str, Any] = self.json("show", run)
        return shown

    def wait(self, what: str, check: Callable[[], Any], timeout: float = DEADLINE) -> Any:
        return wait_for(f"[{self.name}] {what}", check, timeout)

    def wait_status(self, run: str, wanted: str, timeout: float = DEADLINE) -> dict[str, Any]:
        """``show RUN --json`` once its status is ``wanted`` (polled, never slept on)."""

        def reached() -> dict[str, Any] | None:
            shown = self.show(run)
            return shown if shown["status"] == wanted else None

        found: dict[str, Any] = self.wait(f"run {run} {wanted}", reached, timeout)
        return found

    def wait_round(self, run: str, key: str, round: int) -> dict[str, Any]:
        """``show`` once the run is running round ``round`` (its state says so)."""

        def reached() -> dict[str, Any] | None:
            shown = self.show(run)
            mine = shown["state"].get(key) or {}
            return shown if shown["status"] == "running" and mine.get("round") == round else None

        found: dict[str, Any] = self.wait(f"run {run} in round {round}", reached)
        return found

    def start(self, flow: str, *args: str, after_end: bool = False) -> str:
        """``run FLOW --detach``: the new run's id (``after_end``: see ``after_end``)."""
        started = (self.after_end if after_end else self.json)("run", flow, "--detach", *args)
        assert set(started) == {"run", "flow", "warnings"}, started
        assert started["flow"] == flow and started["warnings"] == [], started
        return str(started["run"])

    def stop_everything(self) -> None:
        """After a test: no run of it left running (stopped at once in remote mode,
        its process group killed in local mode)."""
        if self.name == "local":
            kill_live_runs(self.ws)
            return
        done = self.cli("runs", "--all", "--json")
        if done.returncode != 0:
            return
        for row in orjson.loads(done.stdout):
            if row["status"] == "running":
                self.cli("stop", row["run"], "--now", "--json")


def remote_servers(request: pytest.FixtureRequest) -> tuple[str, str]:
    """The session's Temporal address and PostgreSQL URL; the test is skipped (or
    failed, where they are required) when they cannot be started here."""
    try:
        postgres = request.getfixturevalue("postgres_server")
        temporal = request.getfixturevalue("temporal_server")
    except RuntimeError as exc:
        if remote_required():
            pytest.fail(f"remote mode's servers must run here ({REQUIRE_ENVS}): {exc}")
        pytest.skip(f"remote mode's servers cannot be started here: {exc}")
    return str(temporal.address), str(postgres.url())


@pytest.fixture(scope="module")
def remote_cluster(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Cluster]:
    """The session's servers, a task queue of this module's own and one worker on it."""
    temporal, postgres = remote_servers(request)
    cluster = Cluster(temporal, postgres, tmp_path_factory.mktemp("cluster"))
    try:
        worker = cluster.start_worker("contract", max_runs=4)
        worker.wait_polling(timeout=DEADLINE)
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(params=["local", pytest.param("remote", marks=pytest.mark.remote)])
def mode(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Mode]:
    gate = tmp_path / "gate"
    gate.mkdir()
    if request.param == "local":
        _origin, ws = make_origin(tmp_path)
    else:
        cluster: Cluster = request.getfixturevalue("remote_cluster")
        ws = make_client(cluster, new_space("c"), tmp_path).ws
    mode = Mode(request.param, ws, gate)
    try:
        yield mode
    finally:
        mode.stop_everything()
