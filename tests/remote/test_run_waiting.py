"""`run` while no worker polls its task queue: it says once that it waits (on which
queue, how to start a worker), and Ctrl-C is one line, exit 130, and withdraws the
queued start, so a worker started afterwards never runs it. Real Temporal and
PostgreSQL servers, a real SIGINT to the real CLI."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.remote.cluster import COUNTER, Cluster, make_client, wait_for
from tests.remote.servers import PostgresServer
from tests.remote.temporal_server import TemporalServer


@pytest.mark.parametrize(
    "sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP], ids=["INT", "TERM", "HUP"]
)
def test_ctrl_c_while_waiting_for_a_worker_withdraws_the_start(
    temporal_server: TemporalServer,
    postgres_server: PostgresServer,
    space: str,
    tmp_path: Path,
    sig: signal.Signals,
) -> None:
    """Guards against a `run` that waited silently, printed ~40 lines of traceback on
    Ctrl-C and left its start queued, to run later when a worker came. SIGTERM (a CI's
    timeout) and SIGHUP (a closed ssh session) withdraw it too (issue 38 item 4: they
    killed the client and left the start queued; a worker 26 s later ran it); the exit
    status is 128 + the signal, as a process ended by it."""
    cluster = Cluster(temporal_server.address, postgres_server.url(), tmp_path / "cluster")
    try:
        client = make_client(cluster, space, tmp_path)
        client.add_flow("counter", COUNTER)
        stderr = tmp_path / "run.err"
        env = {k: v for k, v in os.environ.items() if not k.startswith("FLOWDROP_")}
        command = [sys.executable, "-m", "flowdrop_tui", "--workspace", str(client.ws)]
        with stderr.open("wb") as sink:
            waiting = subprocess.Popen(
                [*command, "run", "counter"],
                cwd=client.ws,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=sink,
            )
        try:
            wait_for("the waiting line", lambda: "waiting for a worker" in stderr.read_text())
            said = stderr.read_text().splitlines()
            assert len(said) == 1, said
            assert f"on task queue {cluster.task_queue}" in said[0]
            assert f"flowdrop-tui worker --temporal {cluster.temporal}" in said[0]
            waiting.send_signal(sig)
            out, _ = waiting.communicate(timeout=60)
        finally:
            if waiting.poll() is None:
                waiting.kill()
        assert waiting.returncode == 128 + sig, stderr.read_text()
        lines = stderr.read_text().splitlines()
        assert len(lines) == 2, lines  # the waiting line, then one line: no traceback
        assert lines[1].startswith("flowdrop-tui: interrupted; the start of counter was withdrawn")
        assert out == b""

        # A worker comes afterwards: the withdrawn start is not run. Once it polls, the
        # key is free (a start still queued would hold it: ALREADY_RUNNING) and the run
        # asked now is the key's only one.
        worker = cluster.start_worker("a")
        worker.wait_polling()
        started = client.json("run", "counter")
        assert [row["run"] for row in client.json("runs", "counter")] == [started["run"]]
        client.json("stop", started["run"], "--now")
    finally:
        cluster.stop()
