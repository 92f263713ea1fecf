"""Following a run: folding in pieces equals folding at once; status tracks liveness."""

from __future__ import annotations

import os
import random
import signal
from collections.abc import Callable
from pathlib import Path

from flowdrop_tui.core.paths import Layout
from flowdrop_tui.core.records.run_record.follow import RunFollower
from flowdrop_tui.core.records.run_record.run_fold import RunFold, fold, list_run_ids, load_run
from flowdrop_tui.core.records.run_record.run_info import Status
from tests.conftest import CLI, events, wait_for
from tests.flow_bodies import counts_rounds

CALLER = """
    from flowdrop_tui import flow

    @flow(resumable=True)
    def main(run):
        for round in run.rounds(range(3)):
            run.call("inner")
            run.log("between", round=round)
        return "ok"
"""
INNER = """
    from flowdrop_tui import flow

    @flow(resumable=True)
    def main(run):
        for round in run.rounds(range(2)):
            run.state["r"] = round
"""
TICKING = counts_rounds(sleep=0.1)


def test_folding_in_pieces_equals_folding_at_once(
    workspace: Path, flow_writer: Callable[[str, str], Path], cli: CLI
) -> None:
    """Guards RunFold.feed: however a record is split across polls, the run is the same."""
    flow_writer("caller", CALLER)
    flow_writer("inner", INNER)
    cli("run", "caller", check=0)
    layout = Layout(workspace)
    run_id = list_run_ids(layout)[0]
    evs = events(workspace, run_id)
    whole = fold(run_id, layout.runs / run_id, evs)
    rng = random.Random(7)
    for _ in range(20):
        pieces = RunFold(run_id, layout.runs / run_id)
        cut = 0
        while cut < len(evs):
            step = rng.randint(0, 4)
            pieces.feed(evs[cut : cut + step])
            cut += step
        assert pieces.info == whole


def test_a_follower_reads_only_what_was_appended_and_sees_a_kill(
    workspace: Path, flow_writer: Callable[[str, str], Path], cli: CLI
) -> None:
    """Guards the live view's source: increments in order, and ``interrupted`` after kill -9."""
    flow_writer("tick", TICKING)
    run_id = cli("run", "tick", "--detach", check=0).stdout.strip()
    layout = Layout(workspace)
    follower = RunFollower(layout, run_id)
    first = follower.poll()
    assert first.previous is None and first.info.status in (Status.PENDING, Status.RUNNING)
    seen = list(first.events)
    # rounds past those the first poll saw (on a loaded machine it may have seen three)
    wait_for(lambda: load_run(layout, run_id).rounds >= first.info.rounds + 2)
    update = follower.poll()
    assert update.events and update.events[0] not in seen
    seen.extend(update.events)
    history = follower.poll(history=True)
    # The run goes on appending: the history is what was seen, then maybe newer events.
    upto = history.events.index(seen[-1]) + 1
    assert history.events[:upto] == seen[-upto:]
    pid = load_run(layout, run_id).live_pid
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    wait_for(lambda: follower.poll().info.status == Status.INTERRUPTED)
    assert follower.poll().previous == Status.INTERRUPTED
