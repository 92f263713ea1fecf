"""The small version of the worker kill harness (bench/kill9_workers.py;
docs/decisions.md, "Testing remote mode's failures").

Real PostgreSQL, the Temporal dev server and real ``flowdrop-tui worker`` processes:
a counting flow's worker SIGKILLed (its process group, or the whole "machine" with
its run child) at random instants, restarted, the run picked up — after each kill
nothing PostgreSQL acknowledged is lost, the record is whole and the client's
replica bit-for-bit, and there is never more than one live run for the key. The
full version (200 kills) is run by hand; its figures are in docs/reliability.md.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from tests.remote.servers import PostgresServer
from tests.remote.temporal_server import TemporalServer

BENCH = Path(__file__).resolve().parents[2] / "bench"


@pytest.mark.slow
def test_five_worker_kills_lose_nothing(
    tmp_path: Path, postgres_server: PostgresServer, temporal_server: TemporalServer
) -> None:
    """Guards SPEC §18's 'a worker machine that dies shows its run interrupted and the
    next run picks up on any worker from the last saved state', with fencing making the
    surviving run child of a killed worker harmless."""
    done = subprocess.run(
        [
            sys.executable,
            str(BENCH / "kill9.py"),
            "--scenario",
            "workers",
            "--kills",
            "5",
            "--seed",
            "17",
            "--dir",
            str(tmp_path),
            "--json",
            "--postgres",
            postgres_server.url(),
            "--temporal",
            temporal_server.address,
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.stdout.strip(), done.stderr[-3000:]
    figures = orjson.loads(done.stdout)
    assert figures["losses"] == 0, (figures["loss_details"], done.stderr[-3000:])
    assert figures["kills"] == 5 and done.returncode == 0
    assert figures["pick_ups_checked"] >= 3 and figures["interrupted_after_seconds"]["count"] >= 1
    assert figures["most_live_runs_at_once"] == 1
