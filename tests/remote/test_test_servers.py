"""The test servers themselves: loopback only, and none outlives the pytest that
started it, even one killed with SIGKILL (tests/remote/temporal_server.py)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.remote.cluster import wait_for
from tests.remote.servers import PostgresServer
from tests.remote.temporal_server import TemporalServer

STARTER = """
import sys, time
from pathlib import Path
from tests.remote.servers import PostgresServer
from tests.remote.temporal_server import DevServer

temporal = DevServer(Path(sys.argv[1])).start()
postgres = PostgresServer.start()
assert temporal.process is not None and postgres.process is not None
print(temporal.process.pid, postgres.process.pid, flush=True)
time.sleep(600)
"""


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] != "Z"


def _listening_on(port: int) -> list[str]:
    """The local addresses a TCP listener on ``port`` is bound to (/proc/net/tcp)."""
    found = []
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        local, state = line.split()[1], line.split()[3]
        address, at = local.split(":")
        if state == "0A" and int(at, 16) == port:
            found.append(".".join(str(int(address[i : i + 2], 16)) for i in (6, 4, 2, 0)))
    return found


def test_the_session_servers_listen_on_loopback_only(
    temporal_server: TemporalServer, postgres_server: PostgresServer
) -> None:
    """Guards against an open, unauthenticated Temporal frontend (or a trust-auth
    PostgreSQL) on every interface for the length of a test run."""
    port = int(temporal_server.address.rsplit(":", 1)[1])
    assert _listening_on(port) == ["127.0.0.1"]
    assert _listening_on(postgres_server.port) == ["127.0.0.1"]


@pytest.mark.slow
def test_a_killed_sessions_servers_die_with_it(tmp_path: Path) -> None:
    """Guards against servers left running after a pytest run was killed."""
    starter = subprocess.Popen(
        [sys.executable, "-c", STARTER, str(tmp_path / "temporal")],
        cwd=Path(__file__).parents[2],
        env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])},
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert starter.stdout is not None
        line = starter.stdout.readline()
        temporal, postgres = (int(x) for x in line.split())
        assert _alive(temporal) and _alive(postgres)
    finally:
        starter.send_signal(signal.SIGKILL)
        starter.wait(timeout=10)
    wait_for("the Temporal dev server gone", lambda: not _alive(temporal), timeout=30)
    wait_for("PostgreSQL gone", lambda: not _alive(postgres), timeout=30)
