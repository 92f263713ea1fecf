"""Benchmark: what reading costs in remote mode, against the same read locally.

What is timed (medians of ``--n`` each):

- ``runs --json`` as a command (a new process, as a user runs it), locally in the
  workspace that holds the records, and in remote mode on another workspace whose
  replica is already up to date — so the remote figure is the local read plus the
  sync's round trips when nothing changed (connect, the feed after the cursor, the pins);
- catching up: a replica that has never synced pulling ``--runs`` ended runs (one
  ``sync``, in process);
- live: a key set written through on a "worker" (``PostgresStore.write_file``) until a
  ``replica.Follower`` on another workspace has it in its ``state.json`` (LISTEN/NOTIFY).

PostgreSQL is a real server started here in a temporary folder (tests/remote/servers.py,
fsync off as in the tests). Not asserted anywhere: this says what remote reads cost.

    python bench/remote_reads.py            # 100 runs, 10 commands, 50 key sets
    python bench/remote_reads.py --quick    # a smoke run
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import orjson  # noqa: E402

from flowdrop_tui.core.paths import Layout  # noqa: E402
from flowdrop_tui.core.remote import replica  # noqa: E402
from flowdrop_tui.core.remote.daemon.write_through import record_files  # noqa: E402
from flowdrop_tui.core.remote.postgres.store import PostgresStore  # noqa: E402
from tests.remote.servers import PostgresServer, new_space  # noqa: E402
from tests.seeded_records import reindex, seed_run  # noqa: E402


def command_ms(ws: Path, env: dict[str, str], n: int) -> float:
    times = []
    for _ in range(n):
        started = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "flowdrop_tui", "runs", "--json"],
            cwd=ws,
            env=env,
            check=True,
            capture_output=True,
        )
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--n", type=int, default=10, help="commands timed each way")
    parser.add_argument("--sets", type=int, default=50, help="live key sets timed")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--dir", type=Path, default=None, help="where the workspaces go")
    args = parser.parse_args()
    if args.quick:
        args.runs, args.n, args.sets = 10, 3, 5
    server = PostgresServer.start()
    try:
        with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
            root = Path(tmp)
            space = new_space("bench")
            store = PostgresStore(server.url(), space)
            store.ensure_schema()
            worker = root / "worker"
            worker.mkdir()
            for i in range(args.runs):  # ended runs, published as a worker's child does
                run_id = f"20261130T{10 + i // 3600:02d}{i // 60 % 60:02d}{i % 60:02d}.000Z-{i:06x}"
                seed_run(worker, run_id, "counter", minute=i % 600, state={"n": i})
                epoch = store.claim("counter", worker="bench")
                files = record_files(worker / ".flowdrop" / "runs" / run_id)
                store.publish("counter", epoch, run_id, files)
                store.clear_live("counter", epoch, run_id)
            reindex(worker)

            client = root / "client"
            client.mkdir()
            started = time.perf_counter()
            report = replica.sync(Layout(client), store)
            catch_up = (time.perf_counter() - started) * 1000
            assert len(report.changed) == args.runs, report

            plain = {k: v for k, v in os.environ.items() if not k.startswith("FLOWDROP_")}
            remote = {
                **plain,
                "FLOWDROP_POSTGRES": server.url(),
                "FLOWDROP_TEMPORAL": "127.0.0.1:9",
                "FLOWDROP_SPACE": space,
            }
            command_ms(client, remote, 1)  # the first one makes the pins table
            local_ms = command_ms(worker, plain, args.n)
            remote_ms = command_ms(client, remote, args.n)

            watcher = root / "watcher"
            watcher.mkdir()
            replica.sync(Layout(watcher), store)
            run_id = "20261130T235959.000Z-ffffff"
            seed_run(worker, run_id, "live", outcome=None)
            epoch = store.claim("live", worker="bench")
            store.publish("live", epoch, run_id, record_files(worker / ".flowdrop/runs" / run_id))
            follower = replica.Follower(Layout(watcher), server.url(), space)
            follower.start()
            state = watcher / ".flowdrop" / "runs" / run_id / "state.json"
            lags = []
            try:
                for n in range(args.sets):
                    data = orjson.dumps({"live": {"n": n}})
                    started = time.perf_counter()
                    store.write_file("live", epoch, run_id, "state.json", data)
                    deadline = started + 10
                    while time.perf_counter() < deadline:
                        try:
                            if state.read_bytes() == data:
                                break
                        except OSError:
                            pass
                        time.sleep(0.001)
                    else:
                        raise SystemExit(f"key set {n} never reached the follower")
                    lags.append((time.perf_counter() - started) * 1000)
            finally:
                follower.stop()
                store.close()
    finally:
        server.stop()
    print(
        f"runs --json, {args.runs} runs: local {local_ms:.0f} ms, remote (nothing to sync) "
        f"{remote_ms:.0f} ms"
    )
    print(f"ratio (remote / local): {remote_ms / local_ms:.2f}")
    print(
        f"catching up {args.runs} runs from nothing: {catch_up:.0f} ms "
        f"({catch_up / args.runs:.1f} ms a run)"
    )
    print(
        f"a key set on a worker seen by a follower elsewhere: median "
        f"{statistics.median(lags):.1f} ms, max {max(lags):.1f} ms ({len(lags)} sets)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
