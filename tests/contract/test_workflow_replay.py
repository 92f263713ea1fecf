"""``FlowKeyWorkflow`` replays its own histories without non-determinism (issue 21).

Live (remote): real runs on the test cluster — one that completes, one stopped after
its round, one stopped at once, one paused then resumed (two executions of its key),
one paused then closed, one refused on the worker (over budget), and one whose worker
died (the ``reap`` local activity) — each execution's history fetched from Temporal
and replayed by ``temporalio.worker.Replayer``.

Recorded (no server needed): the histories committed under ``histories/`` replay too
(``attended_after_temporal_outage`` is recorded by tests/remote/test_temporal_outage.py),
so a change to the workflow that would break runs already in flight fails here.
Record them again with ``FLOWDROP_RECORD_HISTORIES=1 pytest
tests/contract/test_workflow_replay.py`` — only when old histories may go.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowHistory
from temporalio.worker import Replayer
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

from flowdrop_tui.core.remote.workflow import FlowKeyWorkflow
from tests.contract.conftest import DEADLINE, Mode, gated, remote_servers
from tests.contract.test_reads import TWO_ITEMS
from tests.remote.cluster import Cluster, make_client, wait_for
from tests.remote.servers import new_space

HISTORIES = Path(__file__).parent / "histories"
RECORD_ENV = "FLOWDROP_RECORD_HISTORIES"


def replayer() -> Replayer:
    """A replayer set up as the worker's workflow side is (the same sandbox)."""
    runner = SandboxedWorkflowRunner(
        restrictions=SandboxRestrictions.default.with_passthrough_modules("flowdrop_tui")
    )
    return Replayer(workflows=[FlowKeyWorkflow], workflow_runner=runner)


def replay(histories: dict[str, WorkflowHistory]) -> None:
    """Replay each history; fail naming the one that does not replay."""

    async def all_of() -> None:
        for name, history in histories.items():
            result = await replayer().replay_workflow(history, raise_on_replay_failure=False)
            assert result.replay_failure is None, f"{name}: {result.replay_failure!r}"

    asyncio.run(all_of())


def closed_histories(temporal: str, space: str) -> dict[str, WorkflowHistory]:
    """Every execution of every key of ``space``, once all are closed: ``KEY#N`` (N
    from 1, oldest first) -> its history."""

    async def fetch() -> dict[str, WorkflowHistory] | None:
        client = await Client.connect(temporal)
        found = [e async for e in client.list_workflows(f'WorkflowId STARTS_WITH "{space}/"')]
        if any(e.status == WorkflowExecutionStatus.RUNNING for e in found):
            return None
        found.sort(key=lambda e: (e.id, e.start_time))
        out: dict[str, WorkflowHistory] = {}
        for e in found:
            key = e.id.removeprefix(f"{space}/")
            n = 1 + sum(1 for name in out if name.split("#")[0] == key)
            handle = client.get_workflow_handle(e.id, run_id=e.run_id)
            out[f"{key}#{n}"] = await handle.fetch_history()
        return out

    found: dict[str, WorkflowHistory] = wait_for(
        f"the workflows of {space} closed", lambda: asyncio.run(fetch()), DEADLINE
    )
    return found


def record(histories: dict[str, WorkflowHistory], names: dict[str, str]) -> None:
    """With ``FLOWDROP_RECORD_HISTORIES=1``: keep ``histories[KEY#N]`` as
    ``histories/<names[KEY#N]>.json``."""
    if not os.environ.get(RECORD_ENV):
        return
    HISTORIES.mkdir(exist_ok=True)
    for name, file in names.items():
        (HISTORIES / f"{file}.json").write_text(histories[name].to_json() + "\n")


@pytest.fixture
def remote(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Mode, str]]:
    """A remote client workspace on this module's cluster, and the Temporal address."""
    cluster: Cluster = request.getfixturevalue("remote_cluster")
    client = make_client(cluster, new_space("replay"), tmp_path)
    gate = tmp_path / "gate"
    gate.mkdir()
    mode = Mode("remote", client.ws, gate)
    try:
        yield mode, cluster.temporal
    finally:
        mode.stop_everything()


def space_of(mode: Mode) -> str:
    for line in (mode.ws / ".flowdrop" / "config.toml").read_text().splitlines():
        if line.startswith("space = "):
            return line.split('"')[1]
    raise AssertionError("no space in the client's config")


@pytest.mark.remote
def test_the_histories_of_every_way_a_run_goes_replay(remote: tuple[Mode, str]) -> None:
    """Guards against a workflow change that real runs' histories no longer replay
    through (non-determinism): completed, stopped, stopped now, paused and resumed,
    paused and closed, refused on the worker."""
    mode, temporal = remote
    mode.add_flow("done", TWO_ITEMS)
    for key in ("stopped", "now", "paused", "closed"):
        mode.add_flow(key, gated(mode.gate / key))
        (mode.gate / key).mkdir()
    done = mode.start("done")
    stopped = mode.start("stopped")
    now = mode.start("now")
    mode.wait_round(stopped, "stopped", 1)
    mode.json("stop", stopped)
    (mode.gate / "stopped" / "go-1").touch()
    mode.wait_round(now, "now", 1)
    mode.json("stop", now, "--now")
    paused = mode.start("paused")
    mode.wait_round(paused, "paused", 1)
    mode.json("pause", paused)
    (mode.gate / "paused" / "go-1").touch()
    mode.wait_status(paused, "paused")
    mode.json("resume", paused, "--detach")
    mode.wait_round(paused, "paused", 2)
    mode.json("stop", paused)
    (mode.gate / "paused" / "go-2").touch()
    closed = mode.start("closed")
    mode.wait_round(closed, "closed", 1)
    mode.json("pause", closed)
    (mode.gate / "closed" / "go-1").touch()
    mode.wait_status(closed, "paused")
    assert mode.json("stop", closed)["action"] == "closed"
    for run, status in ((done, "completed"), (stopped, "cancelled"), (now, "cancelled")):
        mode.wait_status(run, status)
    mode.wait_status(paused, "cancelled")
    over = ("run", "stopped", "--max-rounds", "1", "--detach")
    assert mode.refused(*over, after_end=True) == "BUDGET_EXHAUSTED"

    histories = closed_histories(temporal, space_of(mode))
    assert sorted(histories) == [
        "closed#1", "closed#2", "done#1", "now#1", "paused#1", "paused#2", "stopped#1",
        "stopped#2",
    ]  # fmt: skip
    replay(histories)
    record(
        histories,
        {
            "done#1": "completed",
            "stopped#1": "stopped",
            "paused#2": "resumed_then_stopped",
        },
    )


@pytest.mark.remote
def test_a_lost_workers_history_replays(request: pytest.FixtureRequest, tmp_path: Path) -> None:
    """Guards the reap path (the run's activity timed out, then the ``reap`` local
    activity): the worker holding the run dies, another reaps it as interrupted."""
    temporal, postgres = remote_servers(request)
    cluster = Cluster(temporal, postgres, tmp_path / "cluster")
    try:
        first = cluster.start_worker("first", max_runs=1)
        first.wait_polling(timeout=DEADLINE)
        client = make_client(cluster, new_space("lost"), tmp_path)
        gate = tmp_path / "gate"
        gate.mkdir()
        mode = Mode("remote", client.ws, gate)
        mode.add_gated()
        run = mode.start("gated")
        mode.wait_round(run, "gated", 1)
        second = cluster.start_worker("second", max_runs=1)
        second.wait_polling(timeout=DEADLINE)
        first.kill_machine()
        mode.wait_status(run, "interrupted", timeout=DEADLINE + 8)
        histories = closed_histories(temporal, space_of(mode))
        assert sorted(histories) == ["gated#1"]
        replay(histories)
        record(histories, {"gated#1": "worker_lost"})
    finally:
        cluster.stop()


def test_the_recorded_histories_replay() -> None:
    """Guards runs already in flight across an upgrade: each history recorded from a
    real run (``histories/*.json``) replays through today's workflow."""
    recorded = {
        path.stem: WorkflowHistory.from_json(path.stem, path.read_text())
        for path in sorted(HISTORIES.glob("*.json"))
    }
    assert len(recorded) >= 2, f"no recorded histories in {HISTORIES}"
    replay(recorded)
