"""What a client shows of a team's remote runs (issue 38, items 4, 6 and 11): a start
that waits for a worker, the live runs of a flow this checkout lacks, and the worker
that runs or ran a run. Real PostgreSQL, real run children writing through the mirror
(``WorkerChild``), the real CLI; no worker polls, so a start asked stays queued."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from flowdrop_tui.core.remote.postgres.store import PostgresStore
from flowdrop_tui.core.remote.start.start_requests import StartTable, new_id
from tests.conftest import write_flow
from tests.flow_bodies import counts_rounds
from tests.remote.cluster import COUNTER, Cluster, make_client, wait_for
from tests.remote.machines import Machine, WorkerChild, clone, make_origin
from tests.remote.servers import PostgresServer
from tests.remote.temporal_server import TemporalServer


def queue_start(store: PostgresStore, key: str, queue: str = "q-none") -> str:
    """A start asked as ``run KEY`` asks it, on a queue no worker polls: it stays queued."""
    request_id = new_id()
    StartTable(store).ask(request_id, {"space": store.space, "key": key}, "default", queue)
    return request_id


def pending_rows(machine: Machine, *args: str) -> list[dict[str, object]]:
    return [row for row in machine.json("runs", *args) if row["run"] is None]


def test_runs_shows_a_start_waiting_for_a_worker_until_it_is_withdrawn_or_taken(
    tmp_path: Path, postgres_url: str, space: str, pg_store: PostgresStore
) -> None:
    """Guards against a queued start nothing showed (issue 38 item 4: a `run` killed
    while it waited left its start queued, and a worker 26 s later ran it): `runs`
    lists it — `--json` as a row of a run's shape with status `pending` and `run` null,
    the words as a `queued` line naming the queue — and it goes once withdrawn or taken."""
    origin = make_origin(tmp_path, {"counter": counts_rounds(sleep=0.2)})
    client = Machine(clone(origin, tmp_path / "client"), postgres_url, space, origin)
    assert pending_rows(client) == []
    first = queue_start(pg_store, "counter")
    rows = pending_rows(client, "counter")
    assert len(rows) == 1 and rows[0]["flow"] == "counter" and rows[0]["status"] == "pending"
    paged = client.json("runs", "--page")
    assert [row["status"] for row in paged["runs"]] == ["pending"], paged
    assert paged["total"] == 0 and paged["next_before"] is None  # runs only: none yet
    words = client.cli("runs", "counter").stdout
    assert "queued    counter: queued since " in words, words
    assert "waiting for a worker on task queue q-none" in words, words

    second = queue_start(pg_store, "counter")
    assert len(pending_rows(client)) == 2
    table = StartTable(pg_store)
    assert table.withdraw(first)  # Ctrl-C, SIGTERM, SIGHUP or the time limit
    assert len(pending_rows(client)) == 1
    assert table.take(second, "workflow-run-1")  # a worker's run_flow took it
    assert pending_rows(client) == []
    assert "queued" not in client.cli("runs").stdout


def test_a_checkout_without_the_flow_sees_its_live_run_and_its_worker(
    tmp_path: Path, postgres_url: str, space: str, pg_store: PostgresStore
) -> None:
    """Guards against a live run hidden from a checkout that lacks its flow (issue 38
    item 6: the flow was added on the branch a worker runs; `runs` listed it, `flows`
    did not), and against `runs`/`show` never naming the worker (item 11): the worker
    is named while the run is live and still after it ended."""
    origin = make_origin(tmp_path, {"counter": counts_rounds(sleep=0.2)})
    client = Machine(clone(origin, tmp_path / "client"), postgres_url, space, origin)
    worker_ws = clone(origin, tmp_path / "w1")
    write_flow(worker_ws, "branchy", counts_rounds(sleep=0.2))  # only on the worker's side
    child = WorkerChild(worker_ws, postgres_url, space, "branchy", worker="w1")
    try:
        row = wait_for(
            "branchy listed running",
            lambda: next(
                (
                    r
                    for r in client.json("flows")
                    if r["name"] == "branchy" and r["status"] == "running"
                ),
                None,
            ),
        )
        assert row["last_run"] == child.run_id and row["resumable"] is None
        assert "not in this checkout" in str(row["error"]), row
        assert [r["name"] for r in client.json("flows")] == ["counter", "branchy"]
        table = client.cli("runs").stdout
        header, line = table.splitlines()[0], table.splitlines()[1]
        assert "WORKER" in header and line.startswith(child.run_id), table
        # The host: the one the run child reports of itself, or the test's set_live's.
        assert " w1 on " in line, table
        shown = client.cli("show", child.run_id).stdout
        assert "worker          w1 on " in shown, shown
    finally:
        child.kill()  # as a lost run: no longer live anywhere
        child.close()
    wait_for(
        "branchy no longer listed",
        lambda: all(r["name"] != "branchy" for r in client.json("flows")),
    )
    ended = client.json("show", child.run_id)
    assert ended["status"] == "interrupted", ended
    assert "worker          w1 on " in client.cli("show", child.run_id).stdout
    assert " w1 on " in client.cli("runs", "branchy").stdout


def test_a_run_waiting_for_a_worker_is_listed_until_sigterm_withdraws_it(
    temporal_server: TemporalServer, postgres_server: PostgresServer, space: str, tmp_path: Path
) -> None:
    """Guards item 4 end to end on the real servers: while a real `run counter` waits
    for a worker (none polls its queue), `runs` on the same checkout lists its start as
    queued; SIGTERM withdraws it (exit 143) and `runs` no longer lists it."""
    cluster = Cluster(temporal_server.address, postgres_server.url(), tmp_path / "cluster")
    try:
        client = make_client(cluster, space, tmp_path)
        client.add_flow("counter", COUNTER)
        env = {k: v for k, v in os.environ.items() if not k.startswith("FLOWDROP_")}
        waiting = subprocess.Popen(
            [sys.executable, "-m", "flowdrop_tui", "--workspace", str(client.ws), "run", "counter"],
            cwd=client.ws,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            rows = wait_for(
                "the waiting start listed",
                lambda: [row for row in client.json("runs") if row["run"] is None],
            )
            assert [(row["flow"], row["status"]) for row in rows] == [("counter", "pending")]
            words = client.cli("runs", "counter").stdout
            assert f"waiting for a worker on task queue {cluster.task_queue}" in words, words
            waiting.send_signal(signal.SIGTERM)
            assert waiting.wait(timeout=60) == 128 + signal.SIGTERM
        finally:
            if waiting.poll() is None:
                waiting.kill()
        assert [row for row in client.json("runs") if row["run"] is None] == []
        assert "queued" not in client.cli("runs").stdout
    finally:
        cluster.stop()
