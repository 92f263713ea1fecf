"""Benchmark: what a key set costs in remote mode, against the same key set locally.

What is timed, per operation (a median of ``--n`` each, alternating):

- local: ``state["count"] = n`` on a run's ``State`` with no mirror installed —
  ``StateFile.save`` → ``state_log.Keeper.keep`` (a record in the run's pre-allocated
  ``state.log``, fdatasync'd, then ``state.json`` replaced by an unsynced rename);
- remote: the same key set with a ``RemoteMirror`` installed, as in a run child on a
  worker: the local write, then ``fd_write_file`` in PostgreSQL — one round trip, one
  transaction (key row ``FOR SHARE``, epoch compared, upsert, change row, NOTIFY);
  timed twice: with the local save synced as before ("durable here too": the mirror's
  ``keeps_durably`` switched off), and as a run child saves with a mirror that
  ``keeps_durably`` (the record appended to the run's state log without its sync, no
  rename of ``state.json``; PostgreSQL's commit the durable copy);
- the seam's cost in local mode (``records.mirror.current()``, once per write);
- the fenced write alone (``PostgresStore.write_file``) and a fenced append
  (``append_line`` of one event line), on loopback.

PostgreSQL is a real server started here in a temporary folder (tests/remote/servers.py),
durable (fsync on, synchronous_commit on) unless ``--no-fsync``. Not asserted anywhere:
remote mode's goal is correctness (fencing, nothing skipped); this says what it costs.

    python bench/remote_keyset.py            # 200 of each
    python bench/remote_keyset.py --quick    # a smoke run
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from flowdrop_tui.core.records import mirror  # noqa: E402
from flowdrop_tui.core.records.flow_state.state import StateFile  # noqa: E402
from flowdrop_tui.core.remote.daemon.write_through import RemoteMirror, RunTicket  # noqa: E402
from flowdrop_tui.core.remote.postgres.store import PostgresStore  # noqa: E402
from tests.remote.servers import PostgresServer, new_space  # noqa: E402

RUN = "20261130T120000.000Z-aaaaaa"
LINE = b'{"t":"2026-11-30T12:00:00.000Z","event":"log","key":"k","message":"tick","fields":{}}\n'


def timed(op: Callable[[int], None], n: int) -> list[float]:
    out = []
    for i in range(n):
        start = time.perf_counter()
        op(i)
        out.append(time.perf_counter() - start)
    return out


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=200)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--no-fsync", action="store_true")
    parser.add_argument("--dir", type=Path, default=None)
    args = parser.parse_args()
    n = 20 if args.quick else args.n
    server = PostgresServer.start(durable=not args.no_fsync)
    try:
        store = PostgresStore(server.url(), new_space("bench"))
        store.ensure_schema()
        epoch = store.claim("k", worker="bench")
        store.publish("k", epoch, RUN, {"state.json": b"{}", "cycle.jsonl": b""})
        with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
            run_dir = Path(tmp) / ".flowdrop" / "runs" / RUN
            run_dir.mkdir(parents=True)
            states = StateFile(run_dir / "state.json")
            state = states.state("k", {"since": RUN, "count": 0, "done": ["a", "b", "c"]})
            remote_mirror = RemoteMirror(RunTicket(server.url(), store.space, "k", epoch, "bench"))

            def key_set(i: int) -> None:
                state["count"] = i

            local: list[float] = []
            remote: list[float] = []
            kept: list[float] = []
            for _ in range(n // 10):  # alternating batches: drift hits all alike
                mirror.install(None)
                local += timed(key_set, 10)
                mirror.install(remote_mirror)
                remote_mirror.keeps_durably = False  # the local save synced too (before)
                remote += timed(key_set, 10)
                remote_mirror.keeps_durably = True  # as a run child's mirror is made
                kept += timed(key_set, 10)
            mirror.install(None)
            offset = [0]

            def append(_: int) -> None:
                store.append_line("k", epoch, RUN, "cycle.jsonl", LINE, offset=offset[0])
                offset[0] += len(LINE)

            fenced = timed(lambda i: store.write_file("k", epoch, RUN, "state.json", b"{}"), n)
            appends = timed(append, n)
            remote_mirror.close()
        store.close()
    finally:
        server.stop()
    # What local mode pays for the seam: one call to records.mirror.current() per write.
    calls = 200_000
    start = time.perf_counter()
    for _ in range(calls):
        mirror.current()
    seam_ns = (time.perf_counter() - start) / calls * 1e9
    ms = lambda xs: statistics.median(xs) * 1000  # noqa: E731
    durability = "fsync off" if args.no_fsync else "fsync on, synchronous_commit on"
    print(f"PostgreSQL on loopback ({durability}); median of {n} each")
    print(f"local key set (state log, durable):        {ms(local):7.3f} ms")
    print(f"remote key set, durable here too:            {ms(remote):7.3f} ms")
    print(f"remote key set, keeps_durably (no local sync): {ms(kept):5.3f} ms")
    print(f"fenced write alone (fd_write_file):          {ms(fenced):7.3f} ms")
    print(f"fenced append of one event line:             {ms(appends):7.3f} ms")
    print(f"the seam in local mode (no mirror):          {seam_ns:7.0f} ns a write")
    print(f"ratio (remote key set durable here too / local key set): {ms(remote) / ms(local):.2f}")
    ratio = ms(kept) / ms(local)
    print(
        f"ratio (remote key set keeps_durably / local key set): {ratio:.2f}; "
        f"goal <= 1.5: {'met' if ratio <= 1.5 else 'NOT met'}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
