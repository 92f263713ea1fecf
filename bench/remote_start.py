"""Benchmark: a start in remote mode, ``run FLOW`` to the flow's first round, against
the same start locally, in one run.

A real Temporal dev server and a real PostgreSQL (started here, as in tests/remote),
one ``flowdrop-tui worker``, a bare git origin, and two clones of it: a client
workspace in remote mode and a plain local one. The space is given ``--history``
ended runs (copies of a first run's record) and the worker one more start before the
clock runs, as a worker that has served the space before (its mirror cloned, its
imports done, the space seen once). The flow
writes ``time.time()`` to a file as its first round begins and ends. Timed, each
time: from just before ``flowdrop-tui run FLOW`` is spawned to the time the flow
wrote (the same clock: one machine), alternating local and remote; between two
starts the key is left to end (remote: its workflow closed, so the next start is
not waiting on the last one's clean-up).

- **local**: ``run FLOW --detach`` in the local clone: the CLI launches the run child
  and returns; the child imports the flow and begins round 1 (``run FLOW`` in the
  foreground is timed too, for reference);
- **remote**: ``run FLOW`` in the client: the start asked through PostgreSQL (a row in
  ``fd_starts``; the client never loads temporalio), the worker's forwarder starts the
  key's workflow on Temporal, a worker's activity claims the key in PostgreSQL, checks
  out the commit from its mirror, syncs the worktree's replica, launches the same
  child (a warm one) with the write-through mirror, and the answer comes back through
  the row.

Printed: each time, the medians and the ratio remote / local (goal ≤ 1.5).

    python bench/remote_start.py            # 3 of each (the median of 3)
    python bench/remote_start.py --n 5
    python bench/remote_start.py --quick    # 1 of each (a smoke run)
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from temporalio.client import Client  # noqa: E402

from flowdrop_tui.core.remote.postgres.store import PostgresStore  # noqa: E402
from flowdrop_tui.core.remote.workflow import workflow_id  # noqa: E402
from tests.remote.cluster import Cluster, make_client, wait_for  # noqa: E402
from tests.remote.git_origin import git  # noqa: E402
from tests.remote.servers import PostgresServer, new_space  # noqa: E402
from tests.remote.temporal_server import DevServer  # noqa: E402

GOAL = 1.5

FLOW = """
    import time
    from pathlib import Path
    from flowdrop_tui import flow

    MARK = Path({mark!r})

    @flow
    def main(run):
        for r in run.rounds():
            MARK.write_text(repr(time.time()))
            run.state["round"] = r
            return
"""


def cli(ws: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLOWDROP_")}
    return subprocess.run(
        [sys.executable, "-m", "flowdrop_tui", "--workspace", str(ws), *args],
        cwd=ws,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )


def timed_start(ws: Path, mark: Path, args: list[str]) -> float:
    """Seconds from spawning ``run`` to the flow's first round (the time it wrote)."""
    mark.unlink(missing_ok=True)
    start = time.time()
    done = cli(ws, "run", *args)

    if done.returncode != 0:
        raise SystemExit(f"run {args} exited {done.returncode}:\n{done.stdout}{done.stderr}")
    text = wait_for("the first round", lambda: mark.exists() and mark.read_text(), timeout=120)
    return float(text) - start


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=3)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--dir", type=Path, default=None)
    parser.add_argument(
        "--history",
        type=int,
        default=None,
        help="ended runs already in the space (default 300; 20 with --quick)",
    )
    args = parser.parse_args()
    n = 1 if args.quick else args.n
    history = args.history if args.history is not None else 20 if args.quick else 300
    root = Path(tempfile.mkdtemp(prefix="remote-start-", dir=args.dir))
    postgres = PostgresServer.start()
    temporal = DevServer(root / "temporal").start()
    cluster = Cluster(temporal.info.address, postgres.url(), root / "cluster")
    local_ws = root / "local"
    mark = root / "first-round"
    local: list[float] = []
    foreground: list[float] = []
    remote: list[float] = []
    try:
        space = new_space("bench")
        client = make_client(cluster, space, root)
        folder = client.ws / "flows" / "first"
        folder.mkdir(parents=True)
        (folder / "flow.py").write_text(textwrap.dedent(FLOW.format(mark=str(mark))).lstrip())
        git(client.ws, "add", "flows")
        git(client.ws, "commit", "-q", "-m", "flow first")
        git(client.ws, "push", "-q", "origin", "HEAD:main")
        git(root, "clone", "-q", str(client.origin), str(local_ws))
        worker = cluster.start_worker("w0", max_runs=2)
        worker.wait_polling()
        store = PostgresStore(postgres.url(), space)

        def remote_start() -> float:
            took = timed_start(client.ws, mark, ["first", "--json"])
            wait_for("the key free", lambda: not store.live_runs(), timeout=60)
            asyncio.run(workflow_closed(temporal.info.address, workflow_id(space, "first")))
            return took

        def local_start() -> float:
            took = timed_start(local_ws, mark, ["first", "--detach", "--json"])
            wait_for("the local run ended", lambda: local_ended(local_ws), timeout=60)
            return took

        def foreground_start() -> float:
            return timed_start(local_ws, mark, ["first", "--json"])

        # Warm-up: the worker's mirror clone, its first activity; the page cache.
        remote_start()
        add_history(store, history)
        remote_start()  # a warm worker has seen the space as it is: its replica too
        local_start()
        order: list[tuple[list[float], Callable[[], float]]] = [
            (local, local_start),
            (remote, remote_start),
            (foreground, foreground_start),
        ]
        for i in range(n):
            for bucket, start in order if i % 2 == 0 else reversed(order):
                bucket.append(start())
            print(
                f"round {i + 1}: local {local[-1]:.3f} s, remote {remote[-1]:.3f} s, "
                f"local foreground {foreground[-1]:.3f} s",
                flush=True,
            )
        store.close()
    finally:
        cluster.stop()
        temporal.stop()
        postgres.stop()
    med = statistics.median
    print(f"run FLOW to the first round, median of {n} ({history} runs in the space):")
    print(f"  local (run --detach):      {med(local):.3f} s")
    print(f"  local (run, foreground):   {med(foreground):.3f} s")
    print(f"  remote (run, on a worker): {med(remote):.3f} s")
    print(f"ratio (remote / local foreground): {med(remote) / med(foreground):.2f}")
    ratio = med(remote) / med(local)
    met = "met" if ratio <= GOAL else "NOT met"
    print(f"ratio (remote / local --detach): {ratio:.2f}; goal <= {GOAL}: {met}")
    return 0


def add_history(store: PostgresStore, runs: int) -> None:
    """``runs`` more ended runs in the space, copies of the one there (the warm-up's,
    under new ids): the records a worktree's replica of a space in use has to bring."""
    (model,) = store.run_ids()
    files = {rel: store.read_file(model, rel) or b"" for rel in store.relpaths(model)}
    epoch = store.claim("earlier", worker="bench")
    for i in range(runs):
        run = f"20261101T{i // 3600 % 24:02d}{i // 60 % 60:02d}{i % 60:02d}.000Z-{i:06x}"
        store.publish("earlier", epoch, run, files)
        store.clear_live("earlier", epoch, run)
    store.reap("earlier", None, store.key_epoch("earlier"))


async def workflow_closed(address: str, wid: str) -> None:
    """Wait for the key's workflow to close (its worker has let the run go), so the
    next start never waits on this one's clean-up."""
    client = await Client.connect(address)
    await asyncio.wait_for(client.get_workflow_handle(wid).result(), 60)


def local_ended(ws: Path) -> bool:
    runs = cli(ws, "runs", "first", "--json")
    return runs.returncode == 0 and '"running"' not in runs.stdout


if __name__ == "__main__":
    raise SystemExit(main())
