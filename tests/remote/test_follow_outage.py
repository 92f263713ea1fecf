"""``logs -f`` waits out a PostgreSQL outage shorter than its deadline (``SYNC_TIMEOUT``)
and goes on with every line; the outage is a real cut (``TcpProxy``) between the
following client and the real server, while the run prints on its worker."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from flowdrop_tui import cli
from flowdrop_tui.core.remote import reading
from flowdrop_tui.core.remote.postgres.store import PostgresStore
from tests.conftest import wait_for
from tests.remote.machines import Machine, WorkerChild, clone, make_origin
from tests.remote.servers import PostgresServer, TcpProxy

TICKS = 12
HOLD_AT = 4  # the run waits at this round until the test lets it go on

# Prints a line a round; at HOLD_AT it waits for the file `go` in its workspace, so the
# run is quiet through the outage and after it (nothing new for the follower to sync).
GATED_TICKER = f"""
import os
import time
from flowdrop_tui import flow

@flow(resumable=True)
def main(run):
    for r in run.rounds(range({TICKS})):
        print(f"tick {{r}}", flush=True)
        run.state["ticks"] = r
        if r == {HOLD_AT}:
            while not os.path.exists("go"):
                time.sleep(0.05)
        time.sleep(0.05)
"""

DEADLINE = 6.0  # SYNC_TIMEOUT shortened: 30 s, a 20 s outage, kept in proportion
OUTAGE = 3.0


@pytest.fixture
def cluster(
    tmp_path: Path, postgres_url: str, space: str, pg_store: PostgresStore
) -> Iterator[tuple[Path, Machine]]:
    """(the worker's workspace, a client machine)."""
    origin = make_origin(tmp_path, {"ticker": GATED_TICKER})
    worker_ws = clone(origin, tmp_path / "worker")
    yield worker_ws, Machine(clone(origin, tmp_path / "client"), postgres_url, space, origin)


def test_logs_follow_waits_out_an_outage_shorter_than_its_deadline(
    cluster: tuple[Path, Machine],
    postgres_server: PostgresServer,
    space: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Guards against ``logs -f`` giving up (exit 4) after an outage that ended before
    its deadline: it gave up 30 s after the outage began whatever happened after — its
    follower retried 10 s apart, and a sync that brought nothing new did not count as
    following again. Here the run is quiet from before the cut to well past the
    deadline; then it prints the rest, and every line is shown, in order, exit 0."""
    worker_ws, client = cluster
    proxy = TcpProxy(postgres_server.port)
    child = WorkerChild(worker_ws, postgres_server.url(), space, "ticker")
    try:
        for name, value in client.env.items():
            if name.startswith("FLOWDROP_"):
                monkeypatch.setenv(name, value)
        monkeypatch.setenv("FLOWDROP_POSTGRES", proxy.url())
        monkeypatch.setattr(reading, "SYNC_TIMEOUT", DEADLINE)
        wait_for(lambda: child.run_id in child.store.run_ids(), timeout=60)
        output = client.ws / ".flowdrop" / "runs" / child.run_id / "output.log"
        codes: list[int] = []
        argv = ["logs", child.run_id, "-f", "--workspace", str(client.ws)]
        follow = threading.Thread(target=lambda: codes.append(cli.main(argv)), daemon=True)
        follow.start()
        # The run held, and its held round's line in this client's replica: following.
        wait_for(lambda: output.is_file() and f"tick {HOLD_AT}" in output.read_text(), timeout=60)
        proxy.cut()
        cut_at = time.monotonic()
        wait_for(lambda: time.monotonic() - cut_at >= OUTAGE, timeout=OUTAGE + 5)
        proxy.restore()
        wait_for(lambda: proxy.connections() > 0, timeout=DEADLINE)  # it follows again
        # Past the deadline counted from the cut, the run still quiet: still following.
        follow.join(max(0.0, cut_at + DEADLINE + 3.0 - time.monotonic()))
        assert follow.is_alive(), f"logs -f gave up after a {OUTAGE:g} s outage: {codes}"
        (worker_ws / "go").touch()
        follow.join(60)
        assert not follow.is_alive(), "logs -f did not end with the run"
        assert codes == [0]
        captured = capsys.readouterr()
        assert captured.out.splitlines() == [f"tick {r}" for r in range(TICKS)]
        assert captured.err.strip().splitlines()[-1] == f"run {child.run_id}: completed"
        assert "Traceback" not in captured.err
    finally:
        child.close()
        proxy.cut()
