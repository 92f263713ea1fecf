"""A Temporal outage longer than the heartbeat timeout does not kill runs (docs/remote.md,
"What each outage does"): the run's worker is alive (its lease in PostgreSQL is fresh),
so the run goes on through the outage, and once the server is back the key's
workflow attends it again on that worker instead of reaping it.

The test has a dev server of its own (the session's serves other tests): stopped
for 20 s, then started again as it was — the same port, the same ``--db-filename``,
so its workflows and their timers (the run's heartbeat timeout, long past) are
there when it comes back.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from flowdrop_tui.core.remote.postgres.store import PostgresStore
from flowdrop_tui.core.remote.workflow import HEARTBEAT_TIMEOUT
from tests.contract.test_workflow_replay import closed_histories, record, replay
from tests.remote.cluster import COUNTER, Client, Cluster, make_client, wait_for
from tests.remote.temporal_server import DevServer

OUTAGE = 20.0  # seconds the server is down: the scenario, not a synchronisation


@pytest.fixture
def own_temporal(tmp_path: Path) -> Iterator[DevServer]:
    server = DevServer(tmp_path / "temporal").start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def own_cluster(own_temporal: DevServer, postgres_url: str, tmp_path: Path) -> Iterator[Cluster]:
    cluster = Cluster(own_temporal.info.address, postgres_url, tmp_path / "cluster")
    try:
        yield cluster
    finally:
        cluster.stop()


def stored_round(store: PostgresStore, run: str) -> int:
    import orjson

    data = store.read_file(run, "state.json")
    state: dict[str, Any] = orjson.loads(data) if data else {}
    return int(state.get("counter", {}).get("round", 0))


@pytest.mark.slow
def test_a_run_outlives_a_temporal_outage_and_counts_on(
    own_temporal: DevServer, own_cluster: Cluster, space: str, tmp_path: Path
) -> None:
    """Guards against a Temporal restart (or a blip past the heartbeat timeout) killing
    every run in the cluster while clients still show them running."""
    first = own_cluster.start_worker("a", max_runs=1)
    spare = own_cluster.start_worker("b", max_runs=1)  # the other would take a reap
    client: Client = make_client(own_cluster, space, tmp_path)
    client.add_flow("counter", COUNTER)
    first.wait_polling()
    spare.wait_polling()
    run = client.json("run", "counter")["run"]
    store = PostgresStore(own_cluster.postgres, space)
    try:
        info = wait_for("the run live", lambda: (store.run_info(run) or {}).get("live"))
        # Either worker may take it (both poll the queue): the one that did keeps it.
        holder = (store.run_info(run) or {}).get("worker")
        assert info and holder in ("a", "b"), holder
        epoch = store.key_epoch("counter")
        wait_for("three rounds", lambda: stored_round(store, run) >= 3)

        own_temporal.stop()
        down_at = time.monotonic()
        before = stored_round(store, run)
        while time.monotonic() - down_at < OUTAGE:
            time.sleep(0.5)
        during = stored_round(store, run)
        own_temporal.start()
        back_at = time.monotonic()
        assert during > before, "the run stopped counting while Temporal was down"

        # Past the heartbeat timeout (its timer fires as the server comes back), the
        # run is attended again where it runs: still live, same epoch, counting on.
        wait_for(
            "ten more rounds after the outage",
            lambda: stored_round(store, run) >= during + 10,
            timeout=HEARTBEAT_TIMEOUT.total_seconds() * 4 + 30,
        )
        row = store.run_info(run)
        assert row is not None and row["live"] and row["worker"] == holder, row
        assert store.key_epoch("counter") == epoch, "the run was reaped (its key fenced)"
        shown = client.json("show", run)
        assert shown["status"] == "running", shown["status"]
        saved = shown["state"]["counter"]
        assert saved["rounds"] == list(range(1, saved["round"] + 1))  # contiguous

        # The cluster holds it: a request reaches it through its worker's own queue.
        stopped = wait_for(
            "stop --now accepted",
            lambda: (lambda d: d if d.returncode == 0 else None)(
                client.cli("stop", run, "--now", "--json", check=False)
            ),
            timeout=60,
        )
        took = time.monotonic() - back_at
        assert b'"stop_now"' in stopped.stdout.encode()
        wait_for("cancelled", lambda: client.json("show", run)["status"] == "cancelled")
        assert store.key_epoch("counter") == epoch
        print(
            f"temporal outage {OUTAGE:.0f} s: rounds {before} -> {during} during it, "
            f"run still live and counting; stop --now accepted {took:.1f} s after the restart"
        )
        assert "fenced out" not in client.cli("logs", run).stdout
        # The workflow's history through the outage (timed out, leased, attended)
        # replays without non-determinism, and is kept with the recorded ones.
        histories = closed_histories(own_temporal.info.address, space)
        replay(histories)
        record(histories, {"counter#1": "attended_after_temporal_outage"})
    finally:
        store.close()
