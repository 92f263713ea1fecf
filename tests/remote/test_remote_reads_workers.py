"""The read side against a real ``flowdrop-tui worker``: ``logs -f`` on the client
while the run prints on the worker, then ``show`` listing the commits the run made
there (pushed to refs/flowdrop/runs/<run>, fetched by ``show``)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import orjson

from flowdrop_tui.core.remote.postgres.store import PostgresStore
from tests.remote.cluster import Cluster, make_client, wait_for
from tests.remote.git_origin import git

# After its first line it waits for the file GO (an absolute path the test fills in), so
# the client's first line is surely read while the run is live on the worker (a run of
# 3 s could end before it on a loaded machine).
PRINTS_AND_COMMITS = """
    import subprocess
    import time
    from pathlib import Path
    from flowdrop_tui import flow

    @flow(resumable=True)
    def main(run):
        for r in run.rounds(range(10)):
            print(f"tick {r}", flush=True)
            run.state["r"] = r
            while not Path(GO).exists():
                time.sleep(0.05)
            if r == 2:
                subprocess.run(
                    ["git", "-c", "user.name=w", "-c", "user.email=w@w", "commit", "-q",
                     "--allow-empty", "-m", "made on the worker"],
                    check=True,
                )
            time.sleep(0.3)
"""


def test_logs_follow_and_show_from_a_client_of_a_real_worker(
    cluster: Cluster, space: str, postgres_url: str, tmp_path: Path
) -> None:
    """Guards reading from anywhere with real workers: the client's ``logs -f`` prints
    the run's lines while it runs on the worker and ends with its status; ``show`` lists
    the commit the run made on the worker, which the client's own HEAD never had."""
    worker = cluster.start_worker("a")
    client = make_client(cluster, space, tmp_path)
    go = tmp_path / "go"
    client.add_flow("ticker", PRINTS_AND_COMMITS.replace("GO", repr(str(go))))
    worker.wait_polling()
    run_id = client.json("run", "ticker")["run"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLOWDROP_")}
    follow = subprocess.Popen(
        [sys.executable, "-m", "flowdrop_tui", "logs", run_id, "-f", "--json"],
        cwd=client.ws,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    store = PostgresStore(postgres_url, space)
    try:
        assert follow.stdout is not None
        first = orjson.loads(follow.stdout.readline())
        assert first["line"].startswith("tick ")
        assert run_id in store.live_runs()  # printed here while it runs there
        go.write_text("")  # the rest of its rounds now
        # From the same buffered reader as the first line (communicate would skip what
        # it already holds); stderr is one status line.
        watchdog = threading.Timer(120, follow.kill)  # a follow that never ends fails
        watchdog.start()
        rest = follow.stdout.read()
        watchdog.cancel()
        follow.wait(120)
        assert follow.stderr is not None
        err = follow.stderr.read()
    finally:
        if follow.poll() is None:
            follow.kill()
        store.close()
    assert follow.returncode == 0, err
    lines = [orjson.loads(line) for line in rest.splitlines()]
    assert lines[-1] == {"run": run_id, "status": "completed"}
    ticks = [first["line"], *(entry["line"] for entry in lines[:-1])]
    assert ticks[-1] == "tick 9"
    assert ticks == [f"tick {r}" for r in range(10 - len(ticks), 10)]  # in order, none lost
    # The worker pushes the run's commits as it lets the run go, just after its end.
    ref = f"refs/flowdrop/runs/{run_id}"
    wait_for("the run's commits pushed", lambda: git(client.origin, "for-each-ref", ref))
    shown = client.json("show", run_id)
    assert [c["summary"] for c in shown["git"]["commits"]] == ["made on the worker"]
    assert "made on the worker" not in git(client.ws, "log", "--format=%s", "HEAD")
