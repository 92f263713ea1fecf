"""A start asked through PostgreSQL (``core/remote/start/start_requests.py``; docs/decisions.md,
"Remote mode: a start asked through PostgreSQL"): the request's row decides, so a start
is run once or refused whoever dies when. Real PostgreSQL; the last three tests real
Temporal and real ``flowdrop-tui worker`` processes, killed with SIGKILL."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import orjson

from flowdrop_tui.core.remote.postgres.store import PostgresStore
from flowdrop_tui.core.remote.start.start_requests import StartTable
from flowdrop_tui.core.remote.workflow import LEASE_GONE
from tests.remote.cluster import COUNTER, Client, Cluster, make_client, wait_for

REQUEST = {"space": "s", "key": "k", "mode": "run", "args": ["run", "k"]}


def asked(store: PostgresStore, request_id: str, queue: str = "q") -> StartTable:
    table = StartTable(store)
    table.ask(request_id, {**REQUEST, "space": store.space}, "default", queue)
    return table


def test_two_forwarders_racing_for_one_request_take_it_once(pg_store: PostgresStore) -> None:
    """Guards against one start forwarded (and run) twice: two worker processes claim
    at once, one gets it; two workflows' run_flows take it, one may run it."""
    table = asked(pg_store, "r1")
    for worker, token in (("w-a", "a"), ("w-b", "b")):  # both alive: their leases fresh
        pg_store.worker_beat(worker, token, "host", 1, fresh=LEASE_GONE)
    barrier = threading.Barrier(2)
    got: dict[str, list[tuple[str, Any]]] = {}

    def claim(token: str) -> None:
        store = PostgresStore(pg_store.url, pg_store.space)
        try:
            barrier.wait()
            got[token] = StartTable(store).claim("default", "q", token, LEASE_GONE)
        finally:
            store.close()

    racers = [threading.Thread(target=claim, args=(t,)) for t in ("a", "b")]
    for racer in racers:
        racer.start()
    for racer in racers:
        racer.join(30)
    assert sorted(len(rows) for rows in got.values()) == [0, 1], got
    assert table.look("r1")[0] == "forwarding"
    assert table.take("r1", "wf-1") is True
    assert table.take("r1", "wf-2") is False  # a second workflow of the request: no run
    assert table.take("r1", "wf-1") is True  # the same one asking again (a retried call)
    assert table.withdraw("r1") is False  # taken: its run goes on
    assert table.retake("r1") is True  # its worker was lost before the run existed
    assert table.take("r1", "wf-2") is True
    table.answer("r1", {"run": "x"})
    table.answer("r1", {"run": "y"})  # the first answer stands
    assert table.look("r1") == ("answered", {"run": "x"})
    assert table.claim("default", "q", "c", LEASE_GONE) == []  # answered: no one forwards it
    pg_store.rows("DELETE FROM fd_workers WHERE worker IN ('w-a', 'w-b')", ())


def test_a_withdrawn_start_is_never_taken_and_a_dead_forwarders_is_taken_over(
    pg_store: PostgresStore,
) -> None:
    table = asked(pg_store, "r1")
    assert table.withdraw("r1") is True
    assert table.take("r1", "wf-1") is False
    assert table.claim("default", "q", "a", LEASE_GONE) == []
    asked(pg_store, "r2")
    assert [r for r, _ in table.claim("default", "q", "a", LEASE_GONE)] == ["r2"]
    # Its forwarder "a" has no lease at all: another takes it over; one whose lease is
    # fresh keeps it.
    pg_store.worker_beat("w-b", "b", "host", 1, fresh=LEASE_GONE)
    assert [r for r, _ in table.claim("default", "q", "b", LEASE_GONE)] == ["r2"]
    assert table.claim("default", "q", "c", LEASE_GONE) == []
    assert table.look("r2")[0] == "forwarding"
    pg_store.rows("DELETE FROM fd_workers WHERE worker = 'w-b'", ())
    # Another queue's or namespace's forwarders never see it.
    asked(pg_store, "r3", queue="other")
    assert table.claim("other-ns", "other", "c", LEASE_GONE) == []
    # A withdrawn row no client forgot is swept; open ones stay.
    table.sweep(0.0)
    assert table.look("r1")[0] == "withdrawn" and table.look("r2")[0] == "forwarding"
    assert not pg_store.rows("SELECT 1 FROM fd_starts WHERE id = 'r1'", ())


def run_in_background(client: Client, stderr: Path, *args: str) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLOWDROP_")}
    command = [sys.executable, "-m", "flowdrop_tui", "--workspace", str(client.ws)]
    with stderr.open("wb") as sink:
        return subprocess.Popen(
            [*command, "run", *args, "--json"],
            cwd=client.ws,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=sink,
        )


def runs_of(client: Client, key: str) -> dict[str, str]:
    return {str(r["run"]): str(r["status"]) for r in client.json("runs", key)}


def test_a_start_asked_while_no_worker_runs_is_run_once_one_comes(
    cluster: Cluster, space: str, tmp_path: Path
) -> None:
    """Guards a start asked during a deploy (no worker polling): it waits, says so once,
    and runs exactly once when a worker comes."""
    client = make_client(cluster, space, tmp_path)
    client.add_flow("counter", COUNTER)
    stderr = tmp_path / "run.err"
    waiting = run_in_background(client, stderr, "counter")
    try:
        wait_for("the waiting line", lambda: "waiting for a worker" in stderr.read_text())
        cluster.start_worker("late").wait_polling()
        out, _ = waiting.communicate(timeout=120)
    finally:
        if waiting.poll() is None:
            waiting.kill()
    assert waiting.returncode == 0, stderr.read_text()
    started = orjson.loads(out)["run"]
    said = stderr.read_text().splitlines()  # the waiting line once, then where the run is
    assert len(said) == 2 and "waiting for a worker" in said[0], said
    assert said[1].startswith(f"run {started} is on worker late"), said
    assert runs_of(client, "counter") == {started: "running"}
    client.json("stop", started, "--now")


def kill_when(cluster: Cluster, space: str, worker_kill: Any, states: set[str]) -> str:
    """SIGKILL the machine as soon as the key's start request is in one of ``states``."""
    store = PostgresStore(cluster.postgres, space)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            rows = store.rows("SELECT state FROM fd_starts WHERE space = %s", (space,))
            if rows and rows[0][0] in states:
                worker_kill()
                return str(rows[0][0])
            time.sleep(0.005)
    finally:
        store.close()
    raise AssertionError(f"the start request never reached {states}")


def test_a_worker_killed_after_starting_the_workflow_leaves_it_to_another_run_once(
    cluster: Cluster, space: str, tmp_path: Path
) -> None:
    """Guards the request a dead forwarder held: its workflow started and not yet
    taken by any run_flow (its only worker's run slot busy), the machine dies; a new
    worker takes the request over, finds the workflow open for it (its memo) and runs
    it — once — and the client gets its run."""
    client = make_client(cluster, space, tmp_path)
    client.add_flow("counter", COUNTER)
    client.add_flow("other", COUNTER)
    first = cluster.start_worker("a", max_runs=1)
    first.wait_polling()
    busy = client.json("run", "other")["run"]  # the one run slot of worker a
    stderr = tmp_path / "run.err"
    starting = run_in_background(client, stderr, "counter")
    try:
        assert kill_when(cluster, space, first.kill_machine, {"forwarding"}) == "forwarding"
        time.sleep(1.0)  # the workflow stays open, not taken: nobody polls for it
        store = PostgresStore(cluster.postgres, space)
        try:
            assert store.rows("SELECT state FROM fd_starts WHERE space = %s", (space,)) == [
                ("forwarding",)
            ]
        finally:
            store.close()
        cluster.start_worker("b").wait_polling()
        out, _ = starting.communicate(timeout=120)
    finally:
        if starting.poll() is None:
            starting.kill()
    assert starting.returncode == 0, stderr.read_text()
    started = orjson.loads(out)["run"]
    assert runs_of(client, "counter") == {started: "running"}
    client.json("stop", started, "--now")
    wait_for("the busy run interrupted", lambda: runs_of(client, "other")[busy] == "interrupted")


def test_a_worker_killed_once_its_run_flow_took_the_start_leaves_one_run(
    cluster: Cluster, space: str, tmp_path: Path
) -> None:
    """Guards the request taken by a run_flow whose machine died before the run was
    announced: another worker takes the request over and the start is made again, said
    in a warning; a run the dead machine may have made shows interrupted, and exactly
    one run of the key goes on — the one the client was given."""
    client = make_client(cluster, space, tmp_path)
    client.add_flow("counter", COUNTER)
    first = cluster.start_worker("a")
    first.wait_polling()
    stderr = tmp_path / "run.err"
    starting = run_in_background(client, stderr, "counter")
    try:
        assert kill_when(cluster, space, first.kill_machine, {"taken"}) == "taken"
        cluster.start_worker("b").wait_polling()
        out, _ = starting.communicate(timeout=180)
    finally:
        if starting.poll() is None:
            starting.kill()
    assert starting.returncode == 0, stderr.read_text()
    answer = orjson.loads(out)
    started = answer["run"]
    assert any("was lost taking counter" in w for w in answer["warnings"]), answer
    shown = runs_of(client, "counter")
    assert shown.pop(started) == "running", shown
    assert set(shown.values()) <= {"interrupted"}, shown  # made by the dead machine, if any
    client.json("stop", started, "--now")


def test_ctrl_c_after_a_worker_took_the_start_leaves_its_run_going(
    cluster: Cluster, space: str, tmp_path: Path
) -> None:
    """Guards the other side of a withdrawal: once a run_flow took the start, Ctrl-C
    says the run goes on (and where), exit 130, and the run is there."""
    client = make_client(cluster, space, tmp_path)
    client.add_flow("counter", COUNTER)
    worker = cluster.start_worker("a")
    worker.wait_polling()
    stderr = tmp_path / "run.err"
    starting = run_in_background(client, stderr, "counter")
    try:
        kill_when(cluster, space, lambda: starting.send_signal(signal.SIGINT), {"taken"})
        starting.communicate(timeout=60)
    finally:
        if starting.poll() is None:
            starting.kill()
    said = stderr.read_text()
    # Taken, the run is still being made (checkout, replica, launch: well over the few
    # milliseconds the interrupt takes to land): the client was waiting for its answer.
    assert starting.returncode == 130, said
    assert len(said.splitlines()) == 1 and "its run goes on" in said, said
    found = wait_for("the run", lambda: runs_of(client, "counter") or None)
    (run,) = found
    client.json("stop", run, "--now")
