"""The small versions of the reliability harnesses in bench/ (docs/reliability.md;
docs/decisions.md, "Crash safety and bad input").

They run the scripts exactly as a user would, as child processes, and check the
figures they report. The full versions (1,000 kills, ten concurrency trials)
are run by hand; their last figures are in docs/reliability.md.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"


def harness(script: str, tmp_path: Path, *args: str, timeout: float) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, str(BENCH / script), "--dir", str(tmp_path), "--json", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert done.stdout.strip(), done.stderr
    figures: dict[str, Any] = orjson.loads(done.stdout)
    # What went wrong first (a long figures dict is cut short in the report), then all
    said = figures.get("loss_details") or figures.get("losses")
    assert done.returncode == 0, (said, figures, done.stderr[-2000:])
    return figures


@pytest.mark.slow
def test_fifty_kill_9s_at_random_instants_lose_nothing(tmp_path: Path) -> None:
    """Guards SPEC §13 crash safety: after every SIGKILL (mid-round, while starting, pausing,
    resuming, stopping, closing a paused run, writing the index) the state is one the flow
    set, every complete record line parses, the index is exact or rebuilt, and the next
    run picks up one round past the killed run's last."""
    figures = harness("kill9.py", tmp_path, "--kills", "50", timeout=900)
    # A scenario may land two kills at once (the index race kills both sides).
    assert figures["kills"] >= 50 and figures["losses"] == 0, figures["loss_details"]
    assert set(figures["by_scenario"]) == {
        "run",
        "detached",
        "pause",
        "stop",
        "resume",
        "close-paused",
        "index",
    }
    assert figures["engine_reads_exact"] >= 20


@pytest.mark.slow
def test_twenty_prune_kills_leave_every_run_whole_or_gone(tmp_path: Path) -> None:
    """Guards SPEC §16 crash safety: a prune SIGKILLed at random instants leaves each run
    whole or gone, never a kept one gone, the index exact, every key's pick-up answer as
    it was, and a concurrent reader never sees a damaged run; the next prune finishes."""
    figures = harness("kill9.py", tmp_path, "--scenario", "prune", "--kills", "20", timeout=900)
    assert figures["kills"] == 20 and figures["losses"] == 0, figures["loss_details"]
    assert figures["runs_deleted"] > 0 and figures["full_prunes_checked_exact"] >= 2
    assert figures["reader_reads"] > 0


@pytest.mark.slow
def test_twenty_flows_at_once_ten_racing_starts_and_a_viewer(tmp_path: Path) -> None:
    """Guards SPEC §8 'many runs starting and ending at once leave it exact', one live run
    per flow, and viewers that never error while it all happens."""
    figures = harness("concurrency.py", tmp_path, "--trials", "1", timeout=900)
    assert figures["clean_trials"] == 1, figures["problems"]
    assert figures["flows_started_at_once"] == 20 and figures["flows_stopped_cancelled"] == 21
    assert (figures["simultaneous_starts"], figures["of_which_ran"]) == (10, 1)
    assert figures["viewer_calls"] >= 1 and figures["viewer_errors"] == 0
    assert figures["index_exact"] == 1
