"""`run` during a PostgreSQL outage is "unreachable" (exit 4, STORE_UNREACHABLE), never
a worker's failure (exit 1) — whether the client or the worker lost the server. The
outage is a real cut (``TcpProxy``) between each side and the real server."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from tests.remote.cluster import COUNTER, Cluster, make_client
from tests.remote.servers import PostgresServer, TcpProxy
from tests.remote.temporal_server import TemporalServer


@pytest.fixture
def proxies(postgres_server: PostgresServer) -> Iterator[tuple[TcpProxy, TcpProxy]]:
    worker_side, client_side = TcpProxy(postgres_server.port), TcpProxy(postgres_server.port)
    try:
        yield worker_side, client_side
    finally:
        worker_side.cut()
        client_side.cut()


def test_run_during_a_postgres_outage_exits_4(
    temporal_server: TemporalServer,
    proxies: tuple[TcpProxy, TcpProxy],
    space: str,
    tmp_path: Path,
) -> None:
    """Guards against `run` saying WORKER_FAILED (exit 1) when PostgreSQL is down."""
    worker_side, client_side = proxies
    cluster = Cluster(temporal_server.address, worker_side.url(), tmp_path / "cluster")
    try:
        worker = cluster.start_worker("a")
        client = make_client(cluster, space, tmp_path)
        config = client.ws / ".flowdrop" / "config.toml"
        config.write_text(config.read_text().replace(worker_side.url(), client_side.url()))
        client.add_flow("counter", COUNTER)
        worker.wait_polling()

        client_side.cut()  # the client's own way to PostgreSQL
        done = client.cli("run", "counter", "--json", check=False)
        assert done.returncode == 4, done.stdout + done.stderr
        error = orjson.loads(done.stdout)["error"]
        assert (
            error["code"] == "STORE_UNREACHABLE" and "cannot reach PostgreSQL" in error["message"]
        )
        assert "Traceback" not in done.stderr
        client_side.restore()

        worker_side.cut()  # the worker's: it takes the run and cannot claim the key
        done = client.cli("run", "counter", "--json", check=False)
        assert done.returncode == 4, done.stdout + done.stderr
        error = orjson.loads(done.stdout)["error"]
        assert error["code"] == "STORE_UNREACHABLE", error
        assert error["message"].startswith("worker a: cannot reach PostgreSQL"), error
        worker_side.restore()

        # Both back: the same command runs (the refusals left nothing claimed).
        started = client.json("run", "counter")
        client.json("stop", started["run"], "--now")
    finally:
        cluster.stop()
