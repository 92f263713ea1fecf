"""The worker's PostgreSQL password stays with the worker: a flow on it finds it
neither in its environment (nor its initial one, ``/proc/self/environ``, nor a
subprocess's) nor on its command line, and ``ps`` shows it on no command line of the
worker or its run child. Real servers; the password travels in the URL (the test
server trusts loopback, so it is carried and never checked)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.remote.cluster import Cluster, make_client, wait_for
from tests.remote.servers import PostgresServer
from tests.remote.temporal_server import TemporalServer

PASSWORD = "pw-Kq7xZ-never-seen"

# Saves what it can see of its environment, then holds until the test lets it end.
LOOKS_AROUND = """
    import os
    import subprocess
    import time
    from pathlib import Path
    from flowdrop_tui import flow

    @flow(resumable=True)
    def main(run):
        for r in run.rounds(range(1)):
            run.state["environ"] = dict(os.environ)
            run.state["initial"] = Path("/proc/self/environ").read_bytes().decode(errors="replace")
            run.state["cmdline"] = Path("/proc/self/cmdline").read_bytes().decode(errors="replace")
            inherited = subprocess.run(["cat", "/proc/self/environ"], capture_output=True)
            run.state["inherited"] = inherited.stdout.decode(errors="replace")
            run.state["pid"] = os.getpid()
            while not Path(os.environ["GATE"]).exists():
                time.sleep(0.05)
"""


def test_the_worker_password_reaches_no_flow_and_no_command_line(
    temporal_server: TemporalServer,
    postgres_server: PostgresServer,
    space: str,
    tmp_path: Path,
) -> None:
    """Guards against every flow receiving the worker's password (the run child's
    ticket was an environment variable holding the URL, and the worker's whole
    environment went to the flow) and against ``ps`` showing it."""
    url = postgres_server.url().replace("@", f":{PASSWORD}@", 1)
    assert PASSWORD in url
    gate = tmp_path / "go"
    cluster = Cluster(temporal_server.address, url, tmp_path / "cluster")
    try:
        worker = cluster.start_worker(
            "a", postgres_flag=False, env={"PGPASSWORD": PASSWORD, "GATE": str(gate)}
        )
        client = make_client(cluster, space, tmp_path)
        client.add_flow("looks", LOOKS_AROUND)
        worker.wait_polling()
        run = client.json("run", "looks")["run"]
        seen = wait_for(
            "the flow's look around",
            lambda: client.json("show", run)["state"].get("looks", {}).get("pid"),
        )
        state = client.json("show", run)["state"]["looks"]
        assert state["environ"]["GATE"] == str(gate)  # the worker's environment is passed on
        for what in ("environ", "initial", "cmdline", "inherited"):
            assert PASSWORD not in str(state[what]), what
        assert not any(name.startswith("FLOWDROP_POSTGRES") for name in state["environ"])
        assert "FLOWDROP_REMOTE_RUN" not in state["environ"]
        assert "FLOWDROP_REMOTE_RUN" not in state["inherited"]
        # `ps`: every command line of the worker and of its run child.
        assert seen in worker.children()
        shown = subprocess.run(
            ["ps", "-ww", "-o", "args=", "-p", f"{worker.process.pid},{seen}"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        assert len(shown.strip().splitlines()) == 2, shown
        assert PASSWORD not in shown
        # The child's ticket file is gone once it was read; the worker's home keeps none.
        tickets = worker.home / "flowdrop-worker" / "tickets"
        assert tickets.is_dir() and list(tickets.iterdir()) == []
        gate.touch()
        wait_for("the run's end", lambda: client.json("show", run)["status"] == "completed")
    finally:
        cluster.stop()


def test_a_worker_given_the_password_on_its_command_line_warns(
    temporal_server: TemporalServer,
    postgres_server: PostgresServer,
    tmp_path: Path,
) -> None:
    """Guards against a password shown by ``ps`` without a word: the worker says where
    to put it instead (it cannot take back its own command line)."""
    url = postgres_server.url().replace("@", f":{PASSWORD}@", 1)
    cluster = Cluster(temporal_server.address, url, tmp_path / "cluster")
    try:
        worker = cluster.start_worker("a")
        worker.wait_polling()
        said = [line for line in worker.text().splitlines() if "password" in line]
        assert len(said) == 1, worker.text()
        assert "`ps` shows it" in said[0] and "FLOWDROP_POSTGRES" in said[0]
        assert PASSWORD not in worker.text()
    finally:
        cluster.stop()
