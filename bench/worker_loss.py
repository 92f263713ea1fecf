"""Benchmark: how long a dead worker's run takes to show ``interrupted`` (SPEC §18).

A real Temporal dev server and a real PostgreSQL (started here, as in tests/remote),
two ``flowdrop-tui worker`` processes, a bare git origin and a client workspace.
Each time: ``run`` a short-round flow, wait until it has saved a round, ``kill -9``
the holding worker's process group and its run's (as a machine dying), then time
until the client's ``show`` says ``interrupted``; a fresh worker replaces the dead
one. Printed: each time, the median, and its ratio to the heartbeat timeout (the
goal: the timeout plus the reap, so a ratio a little over 1.0).

    python bench/worker_loss.py            # 5 kills
    python bench/worker_loss.py --quick    # 1 kill (a smoke run)
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from flowdrop_tui.core.remote.postgres.store import PostgresStore  # noqa: E402
from flowdrop_tui.core.remote.workflow import HEARTBEAT_TIMEOUT  # noqa: E402
from tests.remote.cluster import (  # noqa: E402
    COUNTER,
    Client,
    Cluster,
    WorkerProcess,
    make_client,
    wait_for,
)
from tests.remote.servers import PostgresServer, new_space  # noqa: E402
from tests.remote.temporal_server import DevServer  # noqa: E402


def one_kill(
    client: Client, store: PostgresStore, workers: dict[str, WorkerProcess]
) -> tuple[float, str]:
    """Run, kill the holder's machine, time until ``show`` says interrupted."""
    started = wait_for(
        "the key free",
        lambda: (lambda d: d if d.returncode == 0 else None)(
            client.cli("run", "counter", "--json", check=False)
        ),
        timeout=60,
    )
    run = orjson.loads(started.stdout)["run"]
    holder = str(wait_for("live", lambda: store.run_info(run))["worker"])
    wait_for(
        "a saved round",
        lambda: client.json("show", run)["state"].get("counter", {}).get("round"),
    )
    workers[holder].kill_machine()
    killed = time.monotonic()
    wait_for(
        "interrupted",
        lambda: client.json("show", run)["status"] == "interrupted",
        timeout=HEARTBEAT_TIMEOUT.total_seconds() + 60,
    )
    return time.monotonic() - killed, holder


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=5)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--dir", type=Path, default=None)
    args = parser.parse_args()
    n = 1 if args.quick else args.n
    root = Path(tempfile.mkdtemp(prefix="worker-loss-", dir=args.dir))
    postgres = PostgresServer.start()
    temporal = DevServer(root / "temporal").start()
    cluster = Cluster(temporal.info.address, postgres.url(), root / "cluster")
    times: list[float] = []
    try:
        space = new_space("bench")
        client = make_client(cluster, space, root)
        client.add_flow("counter", COUNTER)
        workers = {name: cluster.start_worker(name, max_runs=1) for name in ("w0", "w1")}
        for worker in workers.values():
            worker.wait_polling()
        store = PostgresStore(postgres.url(), space)
        for i in range(n):
            took, holder = one_kill(client, store, workers)
            times.append(took)
            print(f"kill {i + 1}: interrupted after {took:.2f} s", flush=True)
            replacement = f"w{i + 2}"
            workers.pop(holder)
            workers[replacement] = cluster.start_worker(replacement, max_runs=1)
            workers[replacement].wait_polling()
        store.close()
    finally:
        cluster.stop()
        temporal.stop()
        postgres.stop()
    median = statistics.median(times)
    timeout = HEARTBEAT_TIMEOUT.total_seconds()
    print(
        f"heartbeat timeout {timeout:.0f} s; kill -9 to interrupted, median of {n}: {median:.2f} s"
    )
    print(f"ratio (interrupted after / heartbeat timeout): {median / timeout:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
