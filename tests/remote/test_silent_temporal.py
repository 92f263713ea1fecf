"""A Temporal address that accepts TCP connections and never answers (a hung server,
another service on its port, a proxy with nothing behind it): every command that
needs Temporal says so in one line within its documented deadline, exit 4 — not the
SDK's own 30 s per connect (issue 38: `stop` took 33 s)."""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from flowdrop_tui.core.remote.postgres.store import PostgresStore
from flowdrop_tui.core.remote.temporal_client import CONNECT_LIMIT
from tests.flow_bodies import counts_rounds
from tests.remote.machines import Machine, WorkerChild, clone, make_origin


class SilentServer:
    """Accepts every connection on loopback, reads nothing, answers nothing."""

    def __init__(self) -> None:
        self.listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(64)
        self.address = f"127.0.0.1:{self.listener.getsockname()[1]}"
        self.accepted: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            self.accepted.append(conn)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.listener.shutdown(socket.SHUT_RDWR)
        self.listener.close()
        for conn in self.accepted:
            conn.close()


@pytest.fixture
def silent() -> Iterator[SilentServer]:
    server = SilentServer()
    yield server
    server.close()


@pytest.fixture
def client(
    tmp_path: Path, postgres_url: str, space: str, pg_store: PostgresStore, silent: SilentServer
) -> Machine:
    origin = make_origin(tmp_path, {"forever": counts_rounds(sleep=0.2)})
    machine = Machine(clone(origin, tmp_path / "client"), postgres_url, space, origin)
    machine.env["FLOWDROP_TEMPORAL"] = silent.address
    return machine


def silent_words(stderr: str, address: str, setting: str = "FLOWDROP_TEMPORAL") -> None:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    line = lines[0]
    assert f"cannot reach the Temporal server at {address}: " in line, line
    # The product's own deadline, not the SDK's 30 s "Timeout expired".
    assert f"no answer within {CONNECT_LIMIT:.0f} s" in line, line
    assert setting in line and "Traceback" not in line and "tonic" not in line


def test_stop_and_pause_of_a_live_run_give_up_on_a_silent_server(
    client: Machine, silent: SilentServer, tmp_path: Path, postgres_url: str, space: str
) -> None:
    """Guards `stop`/`pause` waiting out the SDK's 30 s connect: one line naming the
    address and the setting, code TEMPORAL_UNREACHABLE, exit 4."""
    child = WorkerChild(
        clone(tmp_path / "origin.git", tmp_path / "w"), postgres_url, space, "forever"
    )
    try:
        for verb in (["stop", child.run_id], ["pause", child.run_id]):
            silent_words(client.cli(*verb, check=4).stderr, silent.address)
        answer = client.json("stop", "--now", child.run_id, check=4)
        assert answer["error"]["code"] == "TEMPORAL_UNREACHABLE"
        assert f"no answer within {CONNECT_LIMIT:.0f} s" in answer["error"]["message"]
        assert child.proc.poll() is None  # nothing reached the run
    finally:
        child.close()
    assert silent.accepted  # the commands did get a connection: it is the silence


def test_a_start_no_worker_took_gives_up_on_a_silent_server(
    client: Machine, silent: SilentServer, pg_store: PostgresStore
) -> None:
    """Guards `run`: the TCP probe passes (the port accepts), no worker takes the
    request, and the client's own forward through Temporal then gives up in one line;
    the start is withdrawn (nothing runs it later)."""
    silent_words(client.cli("run", "forever", check=4).stderr, silent.address)
    assert silent.accepted
    with pg_store.connect() as conn:
        left = conn.execute(
            "SELECT count(*) FROM fd_starts WHERE space = %s AND state IN ('asked', 'forwarding')",
            (pg_store.space,),
        ).fetchone()
    assert left == (0,)


def test_a_worker_refuses_to_start_on_a_silent_server(
    tmp_path: Path, silent: SilentServer, postgres_url: str
) -> None:
    """Guards a worker hanging 30 s at its start: one line naming --temporal, exit 4."""
    done = Machine(tmp_path, postgres_url, "unused", tmp_path).cli(
        "worker",
        "--temporal",
        silent.address,
        "--postgres",
        postgres_url,
        "--home",
        str(tmp_path / "home"),
        check=4,
    )
    silent_words(done.stderr, silent.address, setting="--temporal")


def test_any_other_call_to_temporal_is_bounded_the_same_way() -> None:
    """Guards a call after the connect (the stop/pause Update, whose polls the SDK
    retries without end) waiting forever on a server that stopped answering."""
    import asyncio

    from flowdrop_tui.core.remote.remote_errors import TemporalUnreachableError
    from flowdrop_tui.core.remote.temporal_client import within
    from flowdrop_tui.core.remote.temporal_executor import UPDATE_LIMIT
    from flowdrop_tui.core.remote.workflow import DELIVER_LIMIT

    with pytest.raises(TemporalUnreachableError) as caught:
        asyncio.run(within(asyncio.sleep(30), 0.2, "t.internal:7233"))
    assert caught.value.exit_code == 4
    assert "Temporal server at t.internal:7233: no answer within 0.2 s" in caught.value.message
    # A stop to a holding worker that is gone is answered by the workflow first.
    assert DELIVER_LIMIT.total_seconds() < UPDATE_LIMIT
