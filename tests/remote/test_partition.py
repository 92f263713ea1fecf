"""A worker cut off from the network is fenced out (docs/decisions.md,
"Remote records": a partition must not produce two writers).

Worker A runs in its own network namespace (tests/remote/netns.py) and reaches
Temporal and PostgreSQL through the host's veth address; worker B runs on the
host. A's run sets a key every 0.2 s. The link is cut: within the heartbeat
timeout (A's lease in PostgreSQL lapsed too) the run is declared lost
(``interrupted`` on the client) and its key's epoch is bumped; a ``run`` then picks
up on B from the last state PostgreSQL holds.
The link is healed, and A's side had every chance to write again: PostgreSQL
must hold nothing new from it (no file or line row of its run changed, no change
recorded for it after the bump), the picked-up run's state only ever the new
writer's, and A's run process gone (killed by fencing or its worker's watchdog).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from flowdrop_tui.core.remote.workflow import HEARTBEAT_TIMEOUT
from tests.remote import netns
from tests.remote.netns import Netns
from tests.remote.servers import PostgresServer, TcpProxy
from tests.remote.temporal_server import DevServer
from tests.remote.world import RemoteWorld, pid_alive, wait_until

KEY = "tick"
TICK = """
import time
from flowdrop_tui import flow


@flow(resumable=True, description="partition test: a key set every 0.2 s")
def main(run):
    s = run.state
    run.log("picked", state=dict(s))
    for r in run.rounds():
        s["n"] = s.get("n", 0) + 1
        print("n", s["n"], flush=True)
        time.sleep(0.2)
"""
# A bound to wait, not a figure (the figures are printed). Losing the worker takes the
# heartbeat timeout (8 s) and the lease's 6 s; the reaping workflow task can first be
# handed to polls the cut-off worker left open on the server (5 workflow pollers, each
# costing the 2 s task timeout); and every wait here also polls through CLI processes
# (`show` syncs first) that a loaded machine slows tenfold. The old 54 s bound, and a
# fixed 4 s sleep for "A's side had every chance to write", were too close to these.
LOST_WITHIN = HEARTBEAT_TIMEOUT.total_seconds() * 15


@pytest.fixture
def ns() -> Iterator[Netns]:
    netns.need()
    with Netns() as made:
        yield made


@pytest.fixture
def world(tmp_path: Path, ns: Netns) -> Iterator[RemoteWorld]:
    """Servers of this test's own, reached on loopback and the host's veth address only
    (the session's listen on loopback): the namespace reaches them, nothing else does.
    The dev server serves loopback alone (its services dial each other there), so the
    namespace reaches it through a forwarder on the veth address."""
    postgres = PostgresServer.start(listen=("127.0.0.1", ns.host_ip))
    temporal = DevServer(tmp_path / "temporal")
    forward: TcpProxy | None = None
    try:
        temporal.start()
        forward = TcpProxy(temporal.port, listen=ns.host_ip)
        through = f"{ns.host_ip}:{forward.port}"

        def temporal_at(host: str) -> str:
            return through if host == ns.host_ip else temporal.info.address

        made = RemoteWorld(tmp_path / "world", postgres.url, temporal_at)
        try:
            yield made
        finally:
            made.close()
    finally:
        if forward is not None:
            forward.cut()
        temporal.stop()
        postgres.stop()


class StateWatch:
    """Samples a run's state in PostgreSQL every 50 ms: every value it ever held."""

    def __init__(self, world: RemoteWorld, run_id: str) -> None:
        self.world, self.run_id = world, run_id
        self.seen: list[int] = []
        self.done = threading.Event()
        self.thread = threading.Thread(target=self.sample, daemon=True)
        self.thread.start()

    def sample(self) -> None:
        while not self.done.is_set():
            state = self.world.stored_state(self.run_id, KEY)
            if state is not None and (not self.seen or self.seen[-1] != state.get("n")):
                self.seen.append(int(state["n"]))
            time.sleep(0.05)

    def stop(self) -> list[int]:
        self.done.set()
        self.thread.join(timeout=10)
        return self.seen


def started(world: RemoteWorld) -> str:
    answer: dict[str, Any] = world.json("run", KEY, "--detach", timeout=120)
    return str(answer["run"])


@pytest.mark.slow
def test_a_partitioned_worker_is_fenced_out_and_its_run_picked_up_elsewhere(
    world: RemoteWorld, ns: Netns
) -> None:
    world.write_flow(KEY, TICK)
    world.start_worker("a", netns=ns)
    first = started(world)
    row = world.run_row(first)
    assert row is not None and row["worker"] == "a" and row["live"], row
    old_epoch, child = int(row["epoch"]), int(row["pid"])
    wait_until(
        lambda: (world.stored_state(first, KEY) or {}).get("n", 0) >= 5,
        LOST_WITHIN,
        "5 key sets from A",
    )
    world.start_worker("b")  # on the host: it reaps the lost run and takes the pick-up

    ns.cut()
    cut_at = time.monotonic()
    wait_until(
        lambda: world.key_epoch(KEY) > old_epoch,
        LOST_WITHIN,
        "the key's epoch to move",
        interval=0.05,
    )
    fenced_after = time.monotonic() - cut_at
    wait_until(
        lambda: world.show(first)["status"] == "interrupted",
        LOST_WITHIN,
        f"{first} to show interrupted",
    )
    lost_after = time.monotonic() - cut_at
    # From the bump on, nothing of A's run may change in PostgreSQL.
    frozen_rows, frozen_change = world.stored_rows(first), world.last_change(first)
    frozen_state = world.stored_state(first, KEY)
    assert frozen_state is not None and frozen_state["n"] >= 5

    second = started(world)
    assert second != first
    row2 = world.run_row(second)
    assert row2 is not None and row2["worker"] == "b" and int(row2["epoch"]) > old_epoch, row2
    watch = StateWatch(world, second)
    shown = world.show(second)
    assert shown["picked_up_from"] == first, shown
    picked = wait_until(lambda: world.picked(second), LOST_WITHIN, "the pick-up's first log")
    assert picked == frozen_state  # the last state PostgreSQL acknowledged
    wait_until(lambda: len(watch.seen) >= 3, LOST_WITHIN, "B's run to set the key")

    ns.heal()
    healed = world.sql("SELECT clock_timestamp()")[0][0]
    # A's worker reconnects; whatever its side still holds would be written now. It has
    # had its chance once its run process is gone (fenced at its first write, or killed
    # by its worker's keeper, fenced at its first shipping) and its worker renewed its
    # lease after the heal, by PostgreSQL's clock: a condition, not a sleep.
    wait_until(lambda: not pid_alive(child), LOST_WITHIN, f"A's run process {child} to be gone")
    wait_until(
        lambda: world.sql("SELECT 1 FROM fd_workers WHERE worker = 'a' AND seen > %s", healed),
        LOST_WITHIN,
        "A's worker back in contact with PostgreSQL",
    )
    assert world.stored_rows(first) == frozen_rows, "A's run wrote after it was fenced out"
    assert world.changes_after(first, frozen_change) == []
    assert world.stored_state(first, KEY) == frozen_state

    seen = watch.stop()
    start = frozen_state["n"]
    # Only the new writer's values: counting on from the pick-up, never A's.
    # (its state.json starts as the inherited state, then counts up from there)
    assert seen and seen == sorted(seen) and seen[0] >= start and seen[-1] > start, (start, seen)
    assert world.live_runs_of(KEY) == [second]
    assert child not in ns.pids()
    print(
        f"partition: fenced {fenced_after:.1f} s after the cut, shown interrupted "
        f"{lost_after:.1f} s after (heartbeat timeout {HEARTBEAT_TIMEOUT.total_seconds():.0f} s)"
    )
    world.cli("stop", second, "--now")
