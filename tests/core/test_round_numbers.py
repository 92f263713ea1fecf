"""Round numbers never go backwards when the record cannot be appended to (a full
disk): a round whose ``round_started`` is not in ``cycle.jsonl`` is not started, so
the next run, which numbers its rounds from the record, never numbers one again.

The refusal is the kernel's: the run's process may write no file past 120 kB
(RLIMIT_FSIZE: appends fail with EFBIG, as ENOSPC would), while ``state.json``,
small, is still saved."""

from __future__ import annotations

import resource
import signal
import subprocess
import sys
from pathlib import Path

import orjson

from tests.conftest import CLI, events, write_flow

FILLS_THE_RECORD = """
    from flowdrop_tui import flow

    @flow(resumable=True)
    def main(run):
        for number in run.rounds():
            run.state["last"] = number      # what this round did, saved
            run.log("pad", blob="x" * 16000)  # the record grows ~16 kB a round
            if number >= 30:
                return number
"""


def test_a_round_that_cannot_be_recorded_is_not_started(workspace: Path) -> None:
    """Guards against the next run repeating round numbers: before, rounds went on
    unrecorded (their state saved), and the next run started again from the last
    ``round_started`` the record held."""
    write_flow(workspace, "fills", FILLS_THE_RECORD)
    cli = CLI(workspace)
    cli.json("flows")  # described outside the limit

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (120_000, 120_000))
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)

    first = subprocess.run(
        [sys.executable, "-m", "flowdrop_tui", "run", "fills"],
        cwd=workspace,
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=limit,
    )
    run_id = str(cli.json("runs", "fills")[0]["run"])
    state = orjson.loads((workspace / ".flowdrop" / "runs" / run_id / "state.json").read_bytes())
    started = [e["round"] for e in events(workspace, run_id) if e["event"] == "round_started"]
    assert started, first.stderr
    assert state["fills"]["last"] == max(started), (state, started, first.stderr)
    assert "could not be recorded" in first.stderr and "pausing before it" in first.stderr

    second = cli.json("run", "fills")  # no limit now: it picks the thread up
    created = events(workspace, str(second["run"]))[0]
    assert created["event"] == "created"
    assert created["first_round"] == state["fills"]["last"] + 1
    assert created["start"] == "thread" and second["status"] == "completed"
