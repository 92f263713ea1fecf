"""The read verbs in remote mode: another machine's replica, fed by real writes of a real
run child on a "worker" workspace, answers as the worker's own records answer locally."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from flowdrop_tui import cli
from flowdrop_tui.core.remote import reading
from flowdrop_tui.core.remote.postgres.store import PostgresStore
from tests.conftest import wait_for
from tests.flow_bodies import adds_one_a_round, counts_rounds
from tests.remote.machines import (
    Machine,
    WorkerChild,
    clone,
    git,
    local_json,
    make_origin,
    plain_env,
)
from tests.remote.servers import PostgresServer, TcpProxy

UNREACHABLE_EXIT = 4  # SPEC §11: a server remote mode needs was not reached

PRINTS_SLOWLY = """
import time
from pathlib import Path
from flowdrop_tui import flow

@flow(resumable=True)
def main(run):
    for r in run.rounds(range(12)):
        print(f"tick {r}", flush=True)
        run.state["ticks"] = r
        time.sleep(0.25)
"""

# Prints its first line, then waits for a file named "go" in its workspace: a test reads
# that line while the run is surely live (on a loaded machine a run of 3 s could end
# before the follow had printed anything), then lets it finish.
PRINTS_THEN_WAITS = PRINTS_SLOWLY.replace(
    "        time.sleep(0.25)\n",
    '        while not Path("go").exists():\n            time.sleep(0.05)\n',
)

COMMITS_EACH_ROUND = """
import subprocess
import sys
from flowdrop_tui import flow

@flow(resumable=True)
def main(run):
    for r in run.rounds(range(2)):
        subprocess.run(["git", "commit", "-q", "--allow-empty", "-m", f"round {r}"], check=True)
        run.state["r"] = r
"""

FLOWS = {
    "adder": adds_one_a_round("n", 3),
    "ticker": PRINTS_SLOWLY,
    "held_ticker": PRINTS_THEN_WAITS,
    "forever": counts_rounds(sleep=0.2),
    "committer": COMMITS_EACH_ROUND,
}


@pytest.fixture
def cluster(
    tmp_path: Path, postgres_url: str, space: str, pg_store: PostgresStore
) -> Iterator[tuple[Path, Path, Machine]]:
    """(origin, the worker's workspace, a client machine)."""
    origin = make_origin(tmp_path, FLOWS)
    worker_ws = clone(origin, tmp_path / "worker")
    client = Machine(clone(origin, tmp_path / "client"), postgres_url, space, origin)
    yield origin, worker_ws, client


def test_read_verbs_answer_from_the_replica_as_locally(
    cluster: tuple[Path, Path, Machine], postgres_url: str, space: str
) -> None:
    """Guards one view from anywhere: flows, runs, show, snapshot, logs, plan and reindex
    on a machine that never ran anything answer what the worker's own records say."""
    _, worker_ws, client = cluster
    child = WorkerChild(worker_ws, postgres_url, space, "adder")
    try:
        assert child.wait() == 0
    finally:
        child.close()
    run_id = child.run_id
    mine = local_json(worker_ws, "runs")
    theirs = client.json("runs")
    assert [row["run"] for row in theirs] == [run_id]
    assert theirs == mine
    flows = {row["name"]: row for row in client.json("flows")}
    assert flows["adder"]["last_run"] == run_id
    assert flows["adder"]["status"] == "completed"
    assert flows["adder"]["round"] == 3
    shown = client.json("show", run_id)
    local = local_json(worker_ws, "show", run_id)
    for field in ("status", "rounds", "state", "result", "error", "output_tail", "pinned"):
        assert shown[field] == local[field], field
    assert shown["state"] == {"adder": {"n": 3}}
    snapshot = client.cli("snapshot", run_id).stdout
    assert orjson.loads(snapshot) == local_json(worker_ws, "snapshot", run_id)
    logs = client.json("logs", run_id)
    assert logs["status"] == "completed"
    plan = client.json("plan", "adder")
    assert plan == local_json(worker_ws, "plan", "adder")
    assert run_id in orjson.dumps(plan).decode()  # it would pick up the worker's run
    assert client.json("reindex") == {"runs": 1, "keys": 1}


def test_logs_follow_shows_lines_printed_on_another_machine(
    cluster: tuple[Path, Path, Machine], postgres_url: str, space: str
) -> None:
    """Guards ``logs -f`` across machines: lines a run prints on a worker reach a client
    while the run is still going, and the follow ends with the run's final status."""
    _, worker_ws, client = cluster
    child = WorkerChild(worker_ws, postgres_url, space, "held_ticker")
    try:
        follow = client.start("logs", child.run_id, "-f", "--json")
        assert follow.stdout is not None
        first = follow.stdout.readline()
        assert orjson.loads(first) == {"line": "tick 0"}
        assert child.proc.poll() is None  # seen while the run is live, not after
        (worker_ws / "go").write_text("")  # the rest of its rounds now
        # From the same buffered reader as the first line (communicate would skip what
        # it already holds); stderr is one status line.
        watchdog = threading.Timer(60, follow.kill)  # a follow that never ends fails
        watchdog.start()
        rest = follow.stdout.read()
        watchdog.cancel()
        follow.wait(60)
        assert follow.stderr is not None
        err = follow.stderr.read()
        assert follow.returncode == 0, err
    finally:
        child.close()
    lines = [orjson.loads(line) for line in rest.splitlines()]
    assert lines[-1] == {"run": child.run_id, "status": "completed"}
    assert [entry["line"] for entry in lines[:-1]] == [f"tick {r}" for r in range(1, 12)]


def test_show_lists_commits_a_worker_pushed(
    cluster: tuple[Path, Path, Machine], postgres_url: str, space: str
) -> None:
    """Guards ``show`` from anywhere: the commits a run made on its worker, pushed to
    refs/flowdrop/runs/<run> on the origin, are listed on a client whose HEAD never had
    them — fetched on the way."""
    _, worker_ws, client = cluster
    child = WorkerChild(worker_ws, postgres_url, space, "committer")
    try:
        assert child.wait() == 0
    finally:
        child.close()
    git(worker_ws, "push", "-q", "origin", f"HEAD:refs/flowdrop/runs/{child.run_id}")
    shown = client.json("show", child.run_id)
    assert [c["summary"] for c in shown["git"]["commits"]] == ["round 0", "round 1"]
    assert git(client.ws, "rev-parse", f"refs/flowdrop/runs/{child.run_id}") == git(
        worker_ws, "rev-parse", "HEAD"
    )


def test_show_fetches_only_the_runs_own_ref(
    cluster: tuple[Path, Path, Machine], postgres_url: str, space: str
) -> None:
    """Guards every ``show`` fetching every run's ref from the origin (issue 38: a
    team's origin holds one per run): ``show RUN`` fetches ``RUN``'s alone, and a run
    that pushed none is no warning."""
    _, worker_ws, client = cluster
    child = WorkerChild(worker_ws, postgres_url, space, "committer")
    try:
        assert child.wait() == 0
    finally:
        child.close()
    twin = child.run_id[:-1] + ("1" if child.run_id.endswith("0") else "0")
    others = ["20260101T000000.000Z-aaaaaa", twin]
    for run in [child.run_id, *others]:
        git(worker_ws, "push", "-q", "origin", f"HEAD:refs/flowdrop/runs/{run}")
    shown = client.cli("show", child.run_id, "--json")
    assert [c["summary"] for c in orjson.loads(shown.stdout)["git"]["commits"]] == [
        "round 0",
        "round 1",
    ]
    fetched = git(client.ws, "for-each-ref", "--format=%(refname)", "refs/flowdrop/runs")
    assert fetched.split() == [f"refs/flowdrop/runs/{child.run_id}"]
    git(worker_ws, "push", "-q", "origin", f":refs/flowdrop/runs/{child.run_id}")
    git(client.ws, "update-ref", "-d", f"refs/flowdrop/runs/{child.run_id}")
    done = client.cli("show", child.run_id, "--json")  # its ref gone from the origin
    assert orjson.loads(done.stdout)["run"] == child.run_id
    assert "could not fetch" not in done.stderr, done.stderr
    assert git(client.ws, "for-each-ref", "refs/flowdrop/runs") == ""


def test_show_says_when_the_runs_commits_cannot_be_fetched(
    cluster: tuple[Path, Path, Machine], postgres_url: str, space: str, tmp_path: Path
) -> None:
    """Guards a failed fetch: a warning naming the origin, and ``show`` still answers."""
    _, worker_ws, client = cluster
    child = WorkerChild(worker_ws, postgres_url, space, "adder")
    try:
        child.wait()
    finally:
        child.close()
    client.env["FLOWDROP_ORIGIN"] = str(tmp_path / "gone.git")
    done = client.cli("show", child.run_id, "--json")
    assert orjson.loads(done.stdout)["status"] == "completed"
    assert "could not fetch the runs' commits from" in done.stderr
    assert "gone.git" in done.stderr


def test_prune_deletes_in_postgres_and_in_every_replica(
    cluster: tuple[Path, Path, Machine],
    postgres_url: str,
    space: str,
    pg_store: PostgresStore,
    tmp_path: Path,
) -> None:
    """Guards remote prune: live, paused and pinned runs stay; the rest (but what a plain
    run picks up) go from PostgreSQL, from the pruning machine's replica, and from
    another machine's replica at its next sync."""
    origin, worker_ws, client = cluster
    ended = []
    for _ in range(3):
        child = WorkerChild(worker_ws, postgres_url, space, "adder", ["--fresh"])
        try:
            assert child.wait() == 0
        finally:
            child.close()
        ended.append(child.run_id)
    paused = WorkerChild(worker_ws, postgres_url, space, "ticker")
    live = WorkerChild(worker_ws, postgres_url, space, "forever", worker="w2")
    try:
        subprocess.run(  # locally on the worker: a request file its run child reads
            [sys.executable, "-m", "flowdrop_tui", "pause", paused.run_id, "--wait"],
            cwd=worker_ws,
            check=True,
            capture_output=True,
            env=plain_env(),
        )
        paused.wait()
        other = Machine(clone(origin, tmp_path / "other"), postgres_url, space, origin)
        assert len(other.json("runs")) == 5
        client.json("pin", ended[0])
        dry = client.json("prune", "--keep", "0", "--dry-run")
        assert [row["run"] for row in dry["delete"]] == [ended[1]]
        assert len(pg_store.run_ids()) == 5  # a dry run deletes nothing
        report = client.json("prune", "--keep", "0")
        # ended[2] is what a plain `run adder` picks up (and adder's last run): it stays.
        assert sorted(row["run"] for row in report["delete"]) == [ended[1]]
        kept = {row["run"]: row["reasons"] for row in report["kept"]}
        assert "pinned" in kept[ended[0]]
        assert "paused" in kept[paused.run_id]
        assert "live" in kept[live.run_id]
        assert ended[1] not in pg_store.run_ids()
        assert not (client.ws / ".flowdrop" / "runs" / ended[1]).exists()
        assert (other.ws / ".flowdrop" / "runs" / ended[1]).exists()  # not synced yet
        rows = other.json("runs")
        assert ended[1] not in {row["run"] for row in rows}
        assert not (other.ws / ".flowdrop" / "runs" / ended[1]).exists()
        assert {row["run"]: row["pinned"] for row in rows}[ended[0]] is True
        unpinned = other.json("unpin", ended[0])  # from another machine, as locally
        assert unpinned == {"run": ended[0], "pinned": False, "changed": True}
        assert client.json("show", ended[0])["pinned"] is False
    finally:
        paused.close()
        live.close()


def test_an_unreachable_server_is_one_line_and_exit_4(tmp_path: Path) -> None:
    """Guards against a traceback or a hang: a refused connection and a server that
    accepts and never answers both end in one line naming the address, exit 4."""
    ws = tmp_path / "ws"
    ws.mkdir()
    git(ws, "init", "-q", "-b", "main")
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()  # nothing listens there now
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)  # accepts into the backlog, never answers
    silent_port = silent.getsockname()[1]
    try:
        refused = Machine(ws, f"postgresql://someone:secret@127.0.0.1:{port}/db", "s", ws)
        run_id = "20261130T100000.000Z-aaaaaa"
        verbs = [["flows"], ["runs"], ["show", run_id], ["logs", run_id, "-f"], ["prune"]]
        verbs += [["pin", run_id], ["stop", run_id], ["pause", run_id]]  # the same sync
        verbs += [[]]  # the UI: said before it opens
        for verb in verbs:
            done = refused.cli(*verb, check=UNREACHABLE_EXIT)
            one_clear_line(done.stderr, f"127.0.0.1:{port}/db")
        answer = refused.json("runs", check=UNREACHABLE_EXIT)
        assert answer["error"]["code"] == "STORE_UNREACHABLE"
        hanging = Machine(ws, f"postgresql://someone:secret@127.0.0.1:{silent_port}/db", "s", ws)
        started = time.monotonic()
        done = hanging.cli("flows", check=UNREACHABLE_EXIT, timeout=60)
        assert time.monotonic() - started < 40  # the connect timeout, not a hang
        one_clear_line(done.stderr, f"127.0.0.1:{silent_port}/db")
    finally:
        silent.close()


def one_clear_line(stderr: str, address: str) -> None:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    assert address in lines[0]
    assert "FLOWDROP_POSTGRES" in lines[0]  # what to do
    assert "secret" not in stderr  # never the password


def test_logs_follow_stops_with_the_clear_error_when_the_server_goes(
    cluster: tuple[Path, Path, Machine],
    postgres_server: PostgresServer,
    space: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Guards ``logs -f`` against following for ever a run it can no longer hear of: the
    server gone (the connection reset, new ones refused), it stops once following has
    failed for the sync deadline, with the one-line error and exit 4."""
    _, worker_ws, client = cluster
    proxy = TcpProxy(postgres_server.port)
    child = WorkerChild(worker_ws, postgres_server.url(), space, "forever")
    try:
        for name, value in client.env.items():
            if name.startswith("FLOWDROP_"):
                monkeypatch.setenv(name, value)
        monkeypatch.setenv("FLOWDROP_POSTGRES", proxy.url())
        monkeypatch.setattr(reading, "SYNC_TIMEOUT", 2.0)  # the deadline, shortened
        # The run in the store first: its folder appears on the worker before its record
        # reaches PostgreSQL, and on a busy machine the cut came first ("no run", exit 2).
        wait_for(lambda: child.run_id in child.store.run_ids(), timeout=60)
        threading.Timer(1.5, proxy.cut).start()
        codes: list[int] = []
        argv = ["logs", child.run_id, "-f", "--workspace", str(client.ws)]
        follow = threading.Thread(target=lambda: codes.append(cli.main(argv)), daemon=True)
        follow.start()
        follow.join(60)
        assert not follow.is_alive(), "logs -f still following a server that is gone"
        assert codes == [UNREACHABLE_EXIT]
        assert child.proc.poll() is None  # the run itself goes on, on its worker
        err = capsys.readouterr().err.strip().splitlines()
        assert err[-1].startswith("flowdrop-tui: cannot reach PostgreSQL at ")
        assert f":{proxy.port}/" in err[-1]
    finally:
        child.close()
        proxy.cut()
