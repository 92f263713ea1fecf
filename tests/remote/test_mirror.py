"""A real run child writing through to PostgreSQL (``FLOWDROP_REMOTE_RUN``)."""

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
import pytest

from flowdrop_tui.core.paths import OUTPUT
from flowdrop_tui.core.records import mirror as records_mirror
from flowdrop_tui.core.records.flow_state import state_log
from flowdrop_tui.core.records.flow_state.state import StateFile, read_run_states
from flowdrop_tui.core.remote.daemon.write_through import (
    ENV_VAR,
    RemoteMirror,
    RunTicket,
    locate,
    record_files,
    ship_output,
)
from flowdrop_tui.core.remote.postgres.store import PostgresStore
from tests.conftest import wait_for, write_flow
from tests.remote.servers import TcpProxy

# Every round sets a key and logs an event; the end returns a value too big for one
# event line, so the record holds a side file (events/…) as well.
COUNTS = """
import os, time
from flowdrop_tui import flow

@flow(resumable=True)
def main(run):
    hold = os.environ.get("HOLD")  # a file: at round 5 the run waits until it exists
    for r in run.rounds(range(int(os.environ.get("ROUNDS", "12")))):
        while hold and r == 5 and not os.path.exists(hold):
            time.sleep(0.01)
        run.state["n"] = r
        run.log("tick", r=r)
        print("round", r, flush=True)
        time.sleep(float(os.environ.get("PAUSE", "0")))
    return "x" * 70000
"""

# Runs until killed, with a grandchild in its process group (it must die with it).
FOREVER = """
import subprocess, time
from pathlib import Path
from flowdrop_tui import flow

@flow(resumable=True)
def main(run):
    child = subprocess.Popen(["sleep", "600"])
    Path("grandchild.pid").write_text(str(child.pid))
    for r in run.rounds():
        run.state["n"] = r
        time.sleep(0.02)
"""


def run_child(
    ws: Path,
    ticket: RunTicket,
    flow: str,
    extra_env: dict[str, str] | None = None,
    stderr: Any = subprocess.PIPE,
) -> subprocess.Popen[bytes]:
    env = {**os.environ, **ticket.env(), **(extra_env or {})}
    return subprocess.Popen(
        [sys.executable, "-m", "flowdrop_tui", "run", flow],
        cwd=ws,
        env=env,
        stdout=subprocess.PIPE,
        stderr=stderr,
        start_new_session=True,  # as a worker launches it: the run leads its group
    )


def only_run(ws: Path) -> Path:
    runs = [p for p in (ws / ".flowdrop" / "runs").iterdir() if not p.name.startswith(".")]
    assert len(runs) == 1, runs
    return runs[0]


def ticket_for(store: PostgresStore, key: str, url: str | None = None) -> RunTicket:
    epoch = store.claim(key, worker="w1")
    return RunTicket(url or store.url, store.space, key, epoch, "w1")


def assert_mirrored(store: PostgresStore, run_dir: Path) -> None:
    """Every mirrored file of the local record is in PostgreSQL byte for byte."""
    local = record_files(run_dir)
    local.pop(OUTPUT)  # shipped by the worker's activity, not by the run's writers
    assert set(local) >= {"cycle.jsonl", "state.json"}
    for relpath, data in local.items():
        assert store.read_file(run_dir.name, relpath) == data, relpath
    assert set(store.relpaths(run_dir.name)) == {*local, OUTPUT}


def test_a_run_child_writes_every_line_and_the_final_state_through(
    workspace: Path, pg_store: PostgresStore
) -> None:
    """Guards the write-through: the whole record reaches PostgreSQL exactly."""
    write_flow(workspace, "counts", COUNTS)
    ticket = ticket_for(pg_store, "counts")
    child = run_child(workspace, ticket, "counts")
    _, err = child.communicate(timeout=120)
    assert child.returncode == 0, err.decode()
    run_dir = only_run(workspace)
    assert_mirrored(pg_store, run_dir)
    assert any(p.startswith("events/") for p in pg_store.relpaths(run_dir.name))
    cycle = pg_store.read_file(run_dir.name, "cycle.jsonl") or b""
    ticks = [orjson.loads(line) for line in cycle.splitlines() if b'"tick"' in line]
    assert [t["fields"]["r"] for t in ticks] == list(range(12))
    assert orjson.loads(pg_store.read_file(run_dir.name, "state.json") or b"") == {
        "counts": {"n": 11}
    }
    # the worker's activity ships output.log; resending from an old offset is a no-op
    assert ship_output(pg_store, ticket, run_dir, 0) == (run_dir / OUTPUT).stat().st_size
    assert ship_output(pg_store, ticket, run_dir, 0) == (run_dir / OUTPUT).stat().st_size
    assert pg_store.read_file(run_dir.name, OUTPUT) == (run_dir / OUTPUT).read_bytes()
    assert b"round 11" in (pg_store.read_file(run_dir.name, OUTPUT) or b"")
    # the run's publish marked it live; its end is the activity's clear_live
    assert run_dir.name in pg_store.live_runs()
    pg_store.clear_live("counts", ticket.epoch, run_dir.name)
    assert pg_store.live_runs() == {}


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as stat:  # a zombie is dead
        return stat.read().split(") ")[-1][0] != "Z"


def test_a_fence_mid_run_kills_the_child_and_its_group_and_nothing_lands_after(
    workspace: Path, pg_store: PostgresStore
) -> None:
    """Guards against two writers: a run declared lost never writes again."""
    write_flow(workspace, "forever", FOREVER)
    ticket = ticket_for(pg_store, "forever")
    child = run_child(workspace, ticket, "forever")
    try:

        def some_rounds() -> bool:
            runs = pg_store.run_ids()
            state = pg_store.read_file(runs[0], "state.json") if runs else None
            return bool(state) and orjson.loads(state or b"{}").get("forever", {}).get("n", 0) > 3

        wait_for(some_rounds, timeout=60)
        grandchild = int(wait_for(lambda: _read(workspace / "grandchild.pid"), timeout=30))
        assert pg_store.fence("forever") == ticket.epoch + 1
        after_bump = pg_store.last_change_id()
        _, err = child.communicate(timeout=60)
    finally:
        if child.poll() is None:
            os.killpg(child.pid, signal.SIGKILL)
            child.wait()
    assert child.returncode == -signal.SIGKILL
    assert err.count(b"fenced out") == 1 and b"this run stops now" in err
    wait_for(lambda: not _alive(grandchild), timeout=10)  # its whole group went with it
    assert pg_store.last_change_id() == after_bump  # nothing after the bump
    run_dir = only_run(workspace)
    stored = orjson.loads(pg_store.read_file(run_dir.name, "state.json") or b"")
    local = read_run_states(run_dir)  # as every reader reads it: the log first
    # the key set in flight when the bump came is on disk here, refused there
    assert local["forever"]["n"] >= stored["forever"]["n"]


def _read(path: Path) -> str | None:
    try:
        return path.read_text() or None
    except FileNotFoundError:
        return None


def test_an_outage_is_waited_out_and_no_write_is_skipped(
    workspace: Path, pg_store: PostgresStore, postgres_server: object
) -> None:
    """Guards "retry, never skip": PostgreSQL cut off mid-run, then back."""
    from tests.remote.servers import PostgresServer

    assert isinstance(postgres_server, PostgresServer)
    proxy = TcpProxy(postgres_server.port)
    try:
        write_flow(workspace, "counts", COUNTS)
        ticket = ticket_for(pg_store, "counts", url=proxy.url())
        errors = workspace.parent / "stderr"
        cut = workspace.parent / "cut"  # the run holds at round 5 until the server is cut:
        # on a busy machine it could otherwise end before the cut, and nothing would wait
        with open(errors, "wb") as sink:
            env = {"ROUNDS": "40", "PAUSE": "0.05", "HOLD": str(cut)}
            child = run_child(workspace, ticket, "counts", env, stderr=sink)

        def ticks() -> int:
            runs = pg_store.run_ids()
            cycle = pg_store.read_file(runs[0], "cycle.jsonl") if runs else None
            return (cycle or b"").count(b'"tick"')

        wait_for(lambda: ticks() >= 3, timeout=60)
        proxy.cut()
        stalled = ticks()
        cut.touch()
        try:
            wait_for(lambda: b"the run waits and retries" in _read_bytes(errors), timeout=60)
        except AssertionError:
            raise AssertionError(
                f"the run never said it waits (alive: {child.poll() is None}, ticks "
                f"{ticks()} of {stalled}); its stderr: {_read_bytes(errors).decode()!r}"
            ) from None
        assert child.poll() is None and ticks() == stalled  # waiting, not skipping
        proxy.restore()
        child.communicate(timeout=120)
        assert child.returncode == 0, _read_bytes(errors).decode()
        assert_mirrored(pg_store, only_run(workspace))
        assert ticks() == 40
    finally:
        proxy.close()


def _read_bytes(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return b""


@pytest.mark.parametrize(
    ("value", "words"),
    [
        ("{", "not valid JSON"),
        ("[1]", "must be a JSON object"),
        ('{"postgres": "x"}', "missing ['epoch', 'key', 'space', 'worker']"),
        (
            '{"postgres": "x", "space": "s", "key": "k", "epoch": "1", "worker": "w"}',
            "epoch must be a non-empty int",
        ),
        (
            '{"postgres": "x", "space": "s", "key": "k", "epoch": 1, "worker": "w", "x": 1}',
            "unknown ['x']",
        ),
    ],
)
def test_a_bad_ticket_is_refused_before_anything_runs(
    workspace: Path, value: str, words: str
) -> None:
    write_flow(workspace, "counts", COUNTS)
    done = subprocess.run(
        [sys.executable, "-m", "flowdrop_tui", "run", "counts"],
        cwd=workspace,
        env={**os.environ, ENV_VAR: value},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2, done.stderr
    assert words in done.stderr and "FLOWDROP_REMOTE_RUN" in done.stderr
    assert not (workspace / ".flowdrop" / "runs").exists() or not list(
        (workspace / ".flowdrop" / "runs").iterdir()
    )


def test_only_files_of_published_records_are_mirrored(tmp_path: Path) -> None:
    runs = tmp_path / ".flowdrop" / "runs"
    run = "20261130T120000.000Z-aaaaaa"
    assert locate(runs / run / "state.json") == (run, "state.json")
    assert locate(runs / run / "events" / "x.json") == (run, "events/x.json")
    assert locate(runs / f".new-{run}" / "state.json") is None
    assert locate(runs / run / "live.lock") is None
    assert locate(runs / run / "requests" / "stop.json") is None
    assert locate(tmp_path / ".flowdrop" / "index.json") is None
    assert locate(tmp_path / "elsewhere" / "state.json") is None


BUSY = """
from flowdrop_tui import flow

@flow(resumable=True)
def main(run):
    for r in run.rounds():
        # a long round (seconds of write-throughs): a second Ctrl-C 0.3 s after the
        # first still finds the run mid-round, however loaded the machine
        for i in range(2000):
            run.state["n"] = r * 10000 + i
            run.log("tick", r=r, i=i)
"""


@pytest.mark.parametrize("interrupts", [1, 2])
def test_a_ctrl_c_during_a_write_through_loses_and_duplicates_nothing(
    workspace: Path, pg_store: PostgresStore, interrupts: int
) -> None:
    """Guards the re-entry paths: a run busy writing through gets Ctrl-C (its handler
    appends `stop_requested` while the interrupted thread waits on PostgreSQL) and, the
    second time, a stop now (KeyboardInterrupt raised inside that wait). The record in
    PostgreSQL is still the local one, byte for byte."""
    write_flow(workspace, "busy", BUSY)
    ticket = ticket_for(pg_store, "busy")
    child = run_child(workspace, ticket, "busy")
    try:

        def busy() -> bool:
            runs = pg_store.run_ids()
            cycle = pg_store.read_file(runs[0], "cycle.jsonl") if runs else None
            return (cycle or b"").count(b'"tick"') > 50

        wait_for(busy, timeout=60)
        for _ in range(interrupts):
            os.kill(child.pid, signal.SIGINT)
            time.sleep(0.3)
        _, err = child.communicate(timeout=60)
    finally:
        if child.poll() is None:
            os.killpg(child.pid, signal.SIGKILL)
            child.wait()
    assert child.returncode in (0, 130), err.decode()
    assert b"this run stops now" not in err  # the mirror never gave up
    run_dir = only_run(workspace)
    assert_mirrored(pg_store, run_dir)
    cycle = (run_dir / "cycle.jsonl").read_bytes()
    assert b'"stop_requested"' in cycle and b'"ended"' in cycle


def _in_process_mirror(store: PostgresStore, tmp_path: Path) -> tuple[RemoteMirror, Path]:
    epoch = store.claim("k", worker="w")
    run_dir = tmp_path / ".flowdrop" / "runs" / "20261130T120000.000Z-aaaaaa"
    run_dir.mkdir(parents=True)
    (run_dir / "cycle.jsonl").write_bytes(b"")
    mirror = RemoteMirror(RunTicket(store.url, store.space, "k", epoch, "w"), die=_no_death)
    mirror.published(run_dir)
    return mirror, run_dir


def _no_death() -> None:
    raise AssertionError("the mirror gave up")


def test_a_write_re_entered_during_a_write_goes_on_a_connection_of_its_own(
    pg_store: PostgresStore, tmp_path: Path
) -> None:
    """Guards against a signal handler's append deadlocking on the connection its
    thread is waiting on (psycopg's connection lock is not re-entrant)."""
    mirror, run_dir = _in_process_mirror(pg_store, tmp_path)
    cycle = run_dir / "cycle.jsonl"

    def outer(store: PostgresStore) -> None:
        with store._connection().lock:  # as while a query of this thread is in flight
            mirror.appended(cycle, b"from the handler\n", 0)
        store.append_line("k", mirror.ticket.epoch, run_dir.name, "cycle.jsonl", b"x\n", offset=17)

    done = threading.Event()
    thread = threading.Thread(target=lambda: (mirror._send(outer), done.set()), daemon=True)
    thread.start()
    assert done.wait(30), "the re-entered write waited on its own thread's connection"
    assert pg_store.read_file(run_dir.name, "cycle.jsonl") == b"from the handler\nx\n"
    mirror.close()


def test_a_ctrl_c_inside_a_write_is_held_until_the_write_is_delivered(
    pg_store: PostgresStore, tmp_path: Path
) -> None:
    """A KeyboardInterrupt (stop now) raised while a write waits on PostgreSQL: the
    write is sent again on a new connection (it lands once), then the interrupt is
    raised to the flow."""
    mirror, run_dir = _in_process_mirror(pg_store, tmp_path)
    calls: list[int] = []

    def interrupted_once(store: PostgresStore) -> None:
        store.append_line("k", mirror.ticket.epoch, run_dir.name, "cycle.jsonl", b"a\n", offset=0)
        calls.append(id(store._conn))
        if len(calls) == 1:
            raise KeyboardInterrupt  # after the commit, before the answer reached us

    with pytest.raises(KeyboardInterrupt):
        mirror._send(interrupted_once)
    assert len(calls) == 2
    assert pg_store.read_file(run_dir.name, "cycle.jsonl") == b"a\n"
    mirror.close()


def test_a_fenced_mirror_says_one_line_and_ends_the_process(
    pg_store: PostgresStore, tmp_path: Path
) -> None:
    epoch = pg_store.claim("k", worker="w")
    said: list[str] = []
    died: list[bool] = []
    mirror = RemoteMirror(
        RunTicket(pg_store.url, pg_store.space, "k", epoch, "w"),
        say=said.append,
        die=lambda: died.append(True),
    )
    pg_store.fence("k")
    run_dir = tmp_path / ".flowdrop" / "runs" / "20261130T120000.000Z-aaaaaa"
    mirror.wrote(run_dir / "state.json", b"{}")
    assert died == [True] and len(said) == 1 and "fenced out" in said[0]
    assert pg_store.read_file(run_dir.name, "state.json") is None
    mirror.close()


def test_the_mirror_keeps_durably_in_its_process_and_not_in_a_forked_copy(
    pg_store: PostgresStore, tmp_path: Path
) -> None:
    """Guards against a save skipping its sync where no commit stands behind it: a
    forked copy of the run sends nothing to PostgreSQL, so its saves keep their own."""
    mirror, _ = _in_process_mirror(pg_store, tmp_path)
    assert mirror.keeps_durably is True
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the forked copy: says what it sees, then leaves at once
        os.write(write, b"1" if mirror.keeps_durably else b"0")
        os._exit(0)
    os.close(write)
    seen = os.read(read, 1)
    os.close(read)
    os.waitpid(pid, 0)
    assert seen == b"0"
    assert mirror.keeps_durably is True  # this process still does
    mirror.close()


def test_a_key_set_returns_once_postgres_has_it_and_a_ctrl_c_meanwhile_waits_for_it(
    pg_store: PostgresStore, tmp_path: Path
) -> None:
    """Guards a remote key set (its working copy the state log's record, unsynced;
    PostgreSQL's commit the durable copy): when the key set returns, PostgreSQL holds
    the state; a Ctrl-C while the commit waits (the key's row held by another
    transaction) is raised only once it has landed, and nothing is sent twice."""
    mirror_, run_dir = _in_process_mirror(pg_store, tmp_path)
    states = StateFile(run_dir / "state.json")
    state = states.state("k", {"n": 0})
    records_mirror.install(mirror_)
    blocker = pg_store.connect()
    try:
        state["n"] = 1
        # The working copy here is the log's record (state.json is replaced at the
        # log's wrap and at the end); PostgreSQL's state.json is the record's.
        newest = state_log.newest(run_dir)
        assert newest is not None
        assert pg_store.read_file(run_dir.name, "state.json") == newest.payload
        blocker.execute("BEGIN")
        blocker.execute(
            "SELECT 1 FROM fd_keys WHERE space = %s AND key = 'k' FOR UPDATE", (pg_store.space,)
        )
        released = threading.Event()

        def release() -> None:
            time.sleep(0.8)
            released.set()
            blocker.execute("ROLLBACK")

        threading.Thread(target=release, daemon=True).start()
        signal.setitimer(signal.ITIMER_REAL, 0.3)
        previous = signal.signal(signal.SIGALRM, signal.default_int_handler)
        try:
            with pytest.raises(KeyboardInterrupt):
                state["n"] = 2
        finally:
            signal.signal(signal.SIGALRM, previous)
        assert released.is_set()  # raised only after the commit could land
        stored = orjson.loads(pg_store.read_file(run_dir.name, "state.json") or b"{}")
        assert stored["k"]["n"] == 2
    finally:
        records_mirror.install(None)
        blocker.close()
        states.close()
        mirror_.close()


HELD = """
import time
from pathlib import Path
from flowdrop_tui import flow

@flow(resumable=True)
def main(run):
    for r in run.rounds(range(3)):
        run.state["n"] = r
        run.log("tick", r=r)
        while Path("hold").exists():
            time.sleep(0.05)
"""


@pytest.mark.parametrize("then", ["resume", "stop"])
def test_a_paused_run_resumed_or_closed_under_a_new_claim_is_mirrored_whole(
    workspace: Path, pg_store: PostgresStore, monkeypatch: pytest.MonkeyPatch, then: str
) -> None:
    """Guards the writes after creation that are not a running flow's: a paused run
    resumed (its record reopened) or closed (`stop` of a paused run) by a process with a
    later claim. PostgreSQL ends with the local record, byte for byte."""
    from tests.conftest import CLI, paused_mid_run

    first = ticket_for(pg_store, "held")
    monkeypatch.setenv(ENV_VAR, first.env()[ENV_VAR])
    cli = CLI(workspace)
    run_id = paused_mid_run(workspace, cli, "held", HELD)
    run_dir = workspace / ".flowdrop" / "runs" / run_id
    wait_for(
        lambda: pg_store.read_file(run_id, "cycle.jsonl") == (run_dir / "cycle.jsonl").read_bytes()
    )
    pg_store.clear_live("held", first.epoch, run_id)  # the worker saw its child end

    second = ticket_for(pg_store, "held")
    monkeypatch.setenv(ENV_VAR, second.env()[ENV_VAR])
    if then == "resume":
        cli("resume", run_id, check=0)
        assert cli.json("show", run_id)["status"] == "completed"
    else:
        cli("stop", run_id, check=0)
        assert cli.json("show", run_id)["status"] == "cancelled"
    assert_mirrored(pg_store, run_dir)
    # and the first claim can no longer write to it
    with pytest.raises(Exception, match="fenced out"):
        pg_store.write_file("held", first.epoch, run_id, "state.json", b"{}")
