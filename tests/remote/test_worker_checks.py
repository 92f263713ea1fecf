"""A worker checks both servers and its id before it polls (docs/remote.md, "Starting a
worker"): a PostgreSQL it cannot use (a wrong password, a wrong port) is exit 4 in one
line naming the server and the setting to fix, and a second live worker of one id is
refused — against the real servers."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import psycopg

from tests.remote.cluster import Cluster, wait_for
from tests.remote.servers import PostgresServer
from tests.remote.temporal_server import TemporalServer


def worker(tmp_path: Path, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLOWDROP_")}
    home = tmp_path / f"home-{uuid.uuid4().hex[:6]}"
    return subprocess.run(
        [sys.executable, "-m", "flowdrop_tui", "worker", "--home", str(home), *args],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={**env, "HOME": str(tmp_path)},
        timeout=timeout,
    )


def password_role(server: PostgresServer) -> str:
    """A role of the session's server that must give its password (scram), by a
    pg_hba.conf line for it alone ahead of the trust lines, and the server reloaded."""
    role = f"fd_pw_{uuid.uuid4().hex[:8]}"
    hba = server.data / "pg_hba.conf"
    hba.write_text(f"host all {role} 127.0.0.1/32 scram-sha-256\n" + hba.read_text())
    with psycopg.connect(server.url(), autocommit=True) as conn:
        conn.execute(f"CREATE ROLE {role} LOGIN SUPERUSER PASSWORD 'right'")
        conn.execute("SELECT pg_reload_conf()")
    return role


def test_a_worker_with_a_wrong_password_or_port_exits_4_naming_postgresql(
    tmp_path: Path, postgres_server: PostgresServer, temporal_server: TemporalServer
) -> None:
    """Guards against a worker that says "polling" with a PostgreSQL it cannot use, and
    then fails everyone's runs with a message about the client's config."""
    role = password_role(postgres_server)
    at = f"127.0.0.1:{postgres_server.port}/postgres"
    wrong_password = worker(
        tmp_path,
        "--temporal",
        temporal_server.address,
        "--postgres",
        f"postgresql://{role}:wrong@{at}",
    )
    assert wrong_password.returncode == 4, wrong_password.stderr
    [line] = wrong_password.stderr.strip().splitlines()
    assert f'refused the password of role "{role}"' in line and "--postgres" in line, line
    assert "wrong" not in line.replace(f"{role}", "")  # never the password itself
    assert "polling" not in wrong_password.stdout + wrong_password.stderr

    # The same role with its right password polls (the refusal was the password's).
    log = tmp_path / "right.log"
    argv = [sys.executable, "-m", "flowdrop_tui", "worker", "--home", str(tmp_path / "r")]
    argv += ["--temporal", temporal_server.address, "--id", f"r-{role}"]
    argv += ["--postgres", f"postgresql://{role}:right@{at}"]
    with log.open("wb") as out:
        right = subprocess.Popen(
            argv,
            cwd=tmp_path,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        wait_for("the worker polling", lambda: "polling" in log.read_text() or right.poll())
        assert right.poll() is None, log.read_text()
    finally:
        os.killpg(right.pid, signal.SIGTERM)
        right.wait(timeout=60)

    closed = postgres_server.port + 1 if postgres_server.port < 65535 else 1
    wrong_port = worker(
        tmp_path,
        "--temporal",
        temporal_server.address,
        "--postgres",
        f"postgresql://flowdrop@127.0.0.1:{closed}/postgres",
    )
    assert wrong_port.returncode == 4, wrong_port.stderr
    [line] = wrong_port.stderr.strip().splitlines()
    assert f"cannot reach PostgreSQL at flowdrop@127.0.0.1:{closed}" in line, line
    assert "the worker's --postgres" in line


def test_a_second_worker_with_a_live_workers_id_is_refused(
    cluster: Cluster, tmp_path: Path
) -> None:
    """Guards against two workers sharing one id (one queue for stop and pause, one
    lease): pausing that id's runs then failed with a false "shows interrupted"."""
    first = cluster.start_worker("twin")
    first.wait_polling()
    second = worker(
        tmp_path, "--temporal", cluster.temporal, "--postgres", cluster.postgres, "--id", "twin"
    )
    assert second.returncode == 2, second.stderr
    [line] = second.stderr.strip().splitlines()
    assert "another worker with the id 'twin' is alive" in line, line
    assert f"pid {first.process.pid}" in line and "--id" in line

    # Killed, it is gone at once for a worker of its id restarted on its host (its pid
    # is dead): a crashed worker restarts without waiting for its lease to lapse.
    os.killpg(first.process.pid, signal.SIGKILL)
    first.process.wait(timeout=10)
    again = cluster.start_worker("twin")
    again.wait_polling()
    wait_for("the restarted worker still polling", lambda: again.process.poll() is None)
