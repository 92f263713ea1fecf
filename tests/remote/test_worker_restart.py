"""A worker restarted in its home while the run child of its dead self still runs
(docs/decisions.md, "Runs on Temporal workers"; found by the worker kill harness).

A run child leads its own session, so SIGKILL of the worker's process group leaves
it running, still the key's holder until the reaper fences it. A worker restarted
in the same home then sweeps the worktrees its dead self left: it must not pull the
folder from under that child — the child's saves would fail with a warning and the
flow carry on, so key sets it saw return would never reach PostgreSQL. Every value
the flow saw saved must be in PostgreSQL once the run is declared lost.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.remote.servers import PostgresServer
from tests.remote.temporal_server import TemporalServer
from tests.remote.world import RemoteWorld, pid_alive, wait_until

KEY = "acks"
FLOW = """
import time
from flowdrop_tui import flow

ACKS = {acks!r}


@flow(resumable=True, description="worker restart test: acknowledged key sets")
def main(run):
    s = run.state
    for r in run.rounds():
        s["n"] = s.get("n", 0) + 1  # returns once PostgreSQL committed it
        with open(ACKS, "a") as acks:
            acks.write(f"{{s['n']}}\\n")
        time.sleep(0.05)
"""


@pytest.fixture
def world(
    tmp_path: Path, postgres_server: PostgresServer, temporal_server: TemporalServer
) -> Iterator[RemoteWorld]:
    made = RemoteWorld(tmp_path / "world", postgres_server.url, temporal_server.at)
    try:
        yield made
    finally:
        made.close()


def acked(path: Path) -> int:
    return max((int(n) for n in path.read_text().split()), default=0)


@pytest.mark.slow
def test_a_restarted_worker_never_loses_what_its_dead_selfs_run_saved(
    world: RemoteWorld, tmp_path: Path
) -> None:
    acks = tmp_path / "acks.txt"
    acks.touch()
    world.write_flow(KEY, FLOW.format(acks=str(acks)))
    worker = world.start_worker("w1")
    run_id = str(world.json("run", KEY, "--detach")["run"])
    row = world.run_row(run_id)
    assert row is not None
    child = int(row["pid"])
    wait_until(lambda: acked(acks) >= 5, 60, "5 acknowledged key sets")
    assert worker.kill_group()
    assert pid_alive(child)  # its own session: it lives on, for now the key's holder
    world.start_worker("w1")  # the same home, as a supervisor restarting it would
    time.sleep(1)  # the child would go on setting keys meanwhile
    wait_until(lambda: not (world.run_row(run_id) or {}).get("live"), 60, f"{run_id} declared lost")
    wait_until(lambda: not pid_alive(child), 60, f"the run's process {child} gone")
    stored = (world.stored_state(run_id, KEY) or {}).get("n", 0)
    assert acked(acks) <= stored, f"the flow saw n={acked(acks)} saved, PostgreSQL has {stored}"
    assert world.show(run_id)["status"] == "interrupted"
