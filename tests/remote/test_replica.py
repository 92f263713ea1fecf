"""A replica of remote records: the same files, and every reader answers as on the worker."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

from flowdrop_tui.core.paths import REMOTE_LIVE, Layout
from flowdrop_tui.core.records.run_record.liveness import live_pid, local_pid
from flowdrop_tui.core.remote.daemon.write_through import RunTicket, record_files, ship_output
from flowdrop_tui.core.remote.postgres.store import PostgresStore
from flowdrop_tui.core.remote.replica import CURSOR, Follower, sync
from tests.conftest import CLI, wait_for, write_flow

ROUNDS = """
import os, time
from flowdrop_tui import flow

@flow(resumable=True)
def main(run):
    for r in run.rounds(range(int(os.environ.get("ROUNDS", "5")))):
        run.state["n"] = r
        run.log("tick", r=r)
        print("round", r, flush=True)
        time.sleep(float(os.environ.get("PAUSE", "0")))
    return "x" * 70000
"""


@pytest.fixture
def replica_ws(workspace: Path, tmp_path: Path) -> Path:
    """Another machine's view of the same space: a clone of the worker's repository
    (the same commits), with the same flow."""
    ws = tmp_path / "replica"
    subprocess.run(["git", "clone", "-q", str(workspace), str(ws)], check=True)
    (ws / "flows").mkdir(exist_ok=True)
    write_flow(ws, "rounds", ROUNDS)
    return ws


def start_child(
    ws: Path, store: PostgresStore, flow: str, env: dict[str, str]
) -> tuple[subprocess.Popen[bytes], RunTicket]:
    ticket = RunTicket(store.url, store.space, flow, store.claim(flow, worker="w1"), "w1")
    child = subprocess.Popen(
        [sys.executable, "-m", "flowdrop_tui", "run", flow],
        cwd=ws,
        env={**os.environ, **ticket.env(), **env},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    return child, ticket


def run_ids(ws: Path) -> list[str]:
    runs = ws / ".flowdrop" / "runs"
    return (
        sorted(p.name for p in runs.iterdir() if not p.name.startswith("."))
        if runs.is_dir()
        else []
    )


def test_a_record_written_through_is_the_same_file_for_file_in_a_replica(
    workspace: Path, replica_ws: Path, pg_store: PostgresStore
) -> None:
    """Guards the replica's exactness and that readers there answer as on the worker."""
    write_flow(workspace, "rounds", ROUNDS)
    child, ticket = start_child(workspace, pg_store, "rounds", {})
    _, err = child.communicate(timeout=120)
    assert child.returncode == 0, err.decode()
    (run_id,) = run_ids(workspace)
    worker_dir = workspace / ".flowdrop" / "runs" / run_id
    ship_output(pg_store, ticket, worker_dir, 0)
    pg_store.clear_live("rounds", ticket.epoch, run_id)

    report = sync(Layout(replica_ws), pg_store)
    assert run_id in report.changed and report.last == pg_store.last_change_id()
    replica_dir = replica_ws / ".flowdrop" / "runs" / run_id
    assert record_files(replica_dir) == record_files(worker_dir)  # byte for byte
    assert any(name.startswith("events/") for name in record_files(replica_dir))
    assert (replica_dir / "sessions").is_dir() and (replica_dir / "requests").is_dir()
    assert not (replica_dir / REMOTE_LIVE).exists()

    worker_cli, replica_cli = CLI(workspace), CLI(replica_ws)
    for args in (("runs",), ("runs", "rounds"), ("show", run_id), ("flows",), ("plan", "rounds")):
        assert replica_cli.json(*args) == _same_place(worker_cli.json(*args), workspace, replica_ws)
    assert replica_cli.json("show", run_id)["status"] == "completed"
    # the index and the key's run list were kept as a run here would have kept them
    assert (replica_ws / ".flowdrop" / "keys" / "rounds.runs").read_text() == f"{run_id}\n"
    index = orjson.loads((replica_ws / ".flowdrop" / "index.json").read_bytes())
    assert index["keys"]["rounds"]["last_run"] == run_id
    assert index["keys"]["rounds"]["status"] == "completed"

    again = sync(Layout(replica_ws), pg_store)  # nothing new: nothing done
    assert again.changed == set() and record_files(replica_dir) == record_files(worker_dir)


def _same_place(value: Any, worker: Path, replica: Path) -> Any:
    """A worker's answer with its workspace's path where the replica's answer has its own."""
    text = orjson.dumps(value).decode().replace(str(worker), str(replica))
    return orjson.loads(text)


def test_a_live_remote_run_reads_running_then_interrupted_after_reap(
    workspace: Path, replica_ws: Path, pg_store: PostgresStore
) -> None:
    """Guards liveness across machines: the marker is live; a reaped run is interrupted."""
    write_flow(workspace, "rounds", ROUNDS)
    child, _ticket = start_child(
        workspace, pg_store, "rounds", {"ROUNDS": "100000", "PAUSE": "0.05"}
    )
    try:
        layout = Layout(replica_ws)

        def synced_a_round() -> str | None:
            sync(layout, pg_store)
            ids = run_ids(replica_ws)
            state = replica_ws / ".flowdrop" / "runs" / ids[0] / "state.json" if ids else None
            return ids[0] if state and orjson.loads(state.read_bytes())["rounds"].get("n") else None

        run_id = wait_for(synced_a_round, timeout=60)
        replica_dir = replica_ws / ".flowdrop" / "runs" / run_id
        marker = orjson.loads((replica_dir / REMOTE_LIVE).read_bytes())
        assert marker["pid"] == child.pid and marker["worker"] == "w1"
        assert live_pid(replica_dir) == child.pid and local_pid(replica_dir) is None
        cli = CLI(replica_ws)
        assert cli.json("show", run_id)["status"] == "running"
        assert cli.json("runs")[0]["status"] == "running"
        assert cli.json("flows")[0]["status"] == "running"

        os.killpg(child.pid, signal.SIGKILL)  # the worker machine dies
        child.wait()
        pg_store.reap("rounds", run_id)  # the reaper, after the heartbeat timeout
        sync(layout, pg_store)
        assert not (replica_dir / REMOTE_LIVE).exists()
        assert cli.json("show", run_id)["status"] == "interrupted"
        assert cli.json("runs")[0]["status"] == "interrupted"
        assert (replica_dir / "cycle.jsonl").read_bytes() == pg_store.read_file(
            run_id, "cycle.jsonl"
        )
    finally:
        if child.poll() is None:
            os.killpg(child.pid, signal.SIGKILL)
            child.wait()


def test_a_pruned_run_goes_from_the_replica(
    workspace: Path, replica_ws: Path, pg_store: PostgresStore
) -> None:
    write_flow(workspace, "rounds", ROUNDS)
    for _ in range(2):
        child, ticket = start_child(workspace, pg_store, "rounds", {"ROUNDS": "1"})
        assert child.wait(timeout=120) == 0
        pg_store.clear_live("rounds", ticket.epoch, run_ids(workspace)[-1])
    first, second = run_ids(workspace)
    layout = Layout(replica_ws)
    sync(layout, pg_store)
    assert run_ids(replica_ws) == [first, second]
    assert pg_store.delete_runs([first]) == [first]
    report = sync(layout, pg_store)
    assert report.deleted == {first}
    assert run_ids(replica_ws) == [second]
    assert (replica_ws / ".flowdrop" / "keys" / "rounds.runs").read_text() == f"{second}\n"
    assert [r["run"] for r in CLI(replica_ws).json("runs")] == [second]
    assert not list((replica_ws / ".flowdrop" / "trash").iterdir())


def test_a_replica_starts_over_from_a_lost_cursor_and_ends_the_same(
    workspace: Path, replica_ws: Path, pg_store: PostgresStore
) -> None:
    """Applying a change twice is a no-op: a cursor lost (or a kill before it was
    written) costs a re-read, never a duplicated line."""
    write_flow(workspace, "rounds", ROUNDS)
    child, _ticket = start_child(workspace, pg_store, "rounds", {})
    assert child.wait(timeout=120) == 0
    (run_id,) = run_ids(workspace)
    layout = Layout(replica_ws)
    sync(layout, pg_store)
    before = record_files(replica_ws / ".flowdrop" / "runs" / run_id)
    (layout.cache / CURSOR).write_bytes(b"not json")
    assert sync(layout, pg_store).changed == {run_id}
    assert record_files(replica_ws / ".flowdrop" / "runs" / run_id) == before
    # a cursor past the feed's end (a new database): everything again
    (layout.cache / CURSOR).write_bytes(
        orjson.dumps({"v": 1, "space": pg_store.space, "last": 10**12})
    )
    assert sync(layout, pg_store).changed == {run_id}


def test_a_stored_path_never_leaves_the_run_folder(
    replica_ws: Path, pg_store: PostgresStore
) -> None:
    """The feed is input: a path like ../../x or live.lock in it is never written."""
    run_id = "20261130T120000.000Z-aaaaaa"
    epoch = pg_store.claim("k", worker="w")
    created = orjson.dumps({"t": "2026-11-30T12:00:00Z", "event": "created", "key": "k"})
    pg_store.publish("k", epoch, run_id, {"cycle.jsonl": created + b"\n"})
    for bad in ("../../escape", "/abs", "live.lock", "remote-live.json", "a/../../b", ".hidden"):
        pg_store.write_file("k", epoch, run_id, bad, b"bad")
    sync(Layout(replica_ws), pg_store)
    run_dir = replica_ws / ".flowdrop" / "runs" / run_id
    assert sorted(record_files(run_dir)) == ["cycle.jsonl"]
    assert not (replica_ws / ".flowdrop" / "escape").exists()
    assert not (run_dir / "live.lock").exists()


def test_a_follower_sees_a_write_within_a_short_wait(
    workspace: Path, replica_ws: Path, pg_store: PostgresStore
) -> None:
    """Guards the live view: LISTEN/NOTIFY brings a worker's key set to the replica."""
    write_flow(workspace, "rounds", ROUNDS)
    seen: list[set[str]] = []
    follower = Follower(
        Layout(replica_ws),
        pg_store.url,
        pg_store.space,
        on_sync=lambda report: seen.append(report.changed),
        interval=60.0,  # longer than the wait below: only a notification can bring it
    )
    follower.start()
    child, _ticket = start_child(
        workspace, pg_store, "rounds", {"ROUNDS": "100000", "PAUSE": "0.1"}
    )
    try:

        def replica_state() -> int:
            ids = run_ids(replica_ws)
            if not ids:
                return -1
            path = replica_ws / ".flowdrop" / "runs" / ids[0] / "state.json"
            return int(orjson.loads(path.read_bytes())["rounds"].get("n", -1))

        wait_for(lambda: replica_state() >= 3, timeout=30)
        stored = orjson.loads(pg_store.read_file(run_ids(workspace)[0], "state.json") or b"")
        wait_for(lambda: replica_state() >= stored["rounds"]["n"], timeout=15)
        assert seen and any(seen)
    finally:
        os.killpg(child.pid, signal.SIGKILL)
        child.wait()
        follower.stop()
    assert follower._thread is None


@pytest.mark.parametrize(
    "content",
    [b"not json", b"[]", b'{"pid": 0}', b'{"pid": "12"}', b'{"pid": true}', b'{"host": "h"}'],
)
def test_a_marker_the_replica_did_not_write_is_not_alive(tmp_path: Path, content: bytes) -> None:
    (tmp_path / REMOTE_LIVE).write_bytes(content)
    assert live_pid(tmp_path) is None


def test_a_linked_marker_is_not_followed(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere.json"
    elsewhere.write_bytes(b'{"pid": 4242}')
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / REMOTE_LIVE).symlink_to(elsewhere)
    assert live_pid(run_dir) is None


def test_stop_now_on_a_replica_never_signals_the_marker_pid_here(
    replica_ws: Path, pg_store: PostgresStore
) -> None:
    """The marker's pid is a process of another machine: here it may be anyone's."""
    bystander = subprocess.Popen(["sleep", "60"], start_new_session=True)
    try:
        run_id = "20261130T120000.000Z-aaaaaa"
        epoch = pg_store.claim("rounds", worker="w")
        created = {
            "t": "2026-11-30T12:00:00.000Z",
            "event": "created",
            "v": 1,
            "key": "rounds",
            "flow": "flows/rounds",
            "first_round": 1,
            "start": "fresh",
        }
        pg_store.publish(
            "rounds",
            epoch,
            run_id,
            {"cycle.jsonl": orjson.dumps(created) + b"\n", "state.json": b"{}"},
        )
        pg_store.set_live("rounds", epoch, run_id, worker="w", host="far", pid=bystander.pid)
        sync(Layout(replica_ws), pg_store)
        assert live_pid(replica_ws / ".flowdrop" / "runs" / run_id) == bystander.pid
        CLI(replica_ws)("stop", run_id, "--now", check=0)
        assert bystander.poll() is None  # not interrupted
    finally:
        bystander.kill()
        bystander.wait()


def test_syncs_from_several_threads_at_once_apply_each_change_once(
    workspace: Path, replica_ws: Path, pg_store: PostgresStore
) -> None:
    """The UI's Follower and a command's sync on one workspace: never a line twice."""
    import threading

    write_flow(workspace, "rounds", ROUNDS)
    child, _ = start_child(workspace, pg_store, "rounds", {"ROUNDS": "30"})
    assert child.wait(timeout=120) == 0
    (run_id,) = run_ids(workspace)
    errors: list[BaseException] = []

    def one() -> None:
        store = PostgresStore(pg_store.url, pg_store.space)
        try:
            sync(Layout(replica_ws), store)
        except BaseException as exc:
            errors.append(exc)
        finally:
            store.close()

    threads = [threading.Thread(target=one) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert errors == []
    replica_dir = replica_ws / ".flowdrop" / "runs" / run_id
    assert (
        record_files(replica_dir)["cycle.jsonl"]
        == (workspace / ".flowdrop" / "runs" / run_id / "cycle.jsonl").read_bytes()
    )
    assert (replica_ws / ".flowdrop" / "keys" / "rounds.runs").read_text() == f"{run_id}\n"


def test_a_follower_that_cannot_reach_postgresql_says_so_and_stops_promptly(
    replica_ws: Path,
) -> None:
    from tests.remote.servers import free_port

    errors: list[Exception] = []
    follower = Follower(
        Layout(replica_ws),
        f"postgresql://nobody@127.0.0.1:{free_port()}/none",
        "s",
        on_error=errors.append,
    )
    follower.start()
    wait_for(lambda: errors, timeout=30)
    assert "cannot reach PostgreSQL" in str(errors[0])
    follower.stop(timeout=10)
    assert follower._thread is None


def test_a_sync_never_writes_into_a_run_a_process_here_holds(
    workspace: Path, pg_store: PostgresStore
) -> None:
    """A worker's own workspace synced while its child runs: the child's files are its
    own (a stale whole file over its live state.json would undo a key set)."""
    write_flow(workspace, "rounds", ROUNDS)
    child, _ = start_child(workspace, pg_store, "rounds", {"ROUNDS": "100000", "PAUSE": "0.01"})
    try:
        wait_for(lambda: run_ids(workspace), timeout=60)
        (run_id,) = run_ids(workspace)
        run_dir = workspace / ".flowdrop" / "runs" / run_id
        wait_for(lambda: (run_dir / "state.json").exists(), timeout=30)
        epoch = pg_store.key_epoch("rounds")
        # what a stale replica would write: an older state, a shorter record
        decoy = PostgresStore(pg_store.url, pg_store.space)
        stale = b'{"rounds":{"n":-1}}'
        before = (run_dir / "cycle.jsonl").stat().st_size
        sync(Layout(workspace), decoy)
        decoy.write_file("rounds", epoch, run_id, "state.json", stale)
        sync(Layout(workspace), decoy)
        decoy.close()
        assert (run_dir / "state.json").read_bytes() != stale
        assert not (run_dir / REMOTE_LIVE).exists()
        assert (run_dir / "cycle.jsonl").stat().st_size >= before
    finally:
        os.killpg(child.pid, signal.SIGKILL)
        child.wait()
