"""The small version of the I/O-fault harness (bench/faults.py; docs/decisions.md,
"Durability").

The real ``flowdrop-tui run`` under ``strace -e inject=``: every write failing with
ENOSPC (the record's creation refused, never a run without its ``created``; a
completed run never exiting 1 over its output), saves failing part of the time
(ENOSPC on the state's bytes, EIO on its syncs, a failed rename), and a real tmpfs
filled to its last kilobytes. Skipped, saying why, without strace (.ci/run installs it).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))
from faults import can_run  # noqa: E402

WHY = can_run()


@pytest.mark.skipif(WHY is not None, reason=f"I/O-fault harness: {WHY}")
def test_injected_io_faults_and_a_full_tmpfs_never_lose_the_last_good_save(
    tmp_path: Path,
) -> None:
    """Items 5 and 7: a created event that could not be written still published the run
    and ran the flow; a full stdout made a completed run exit 1 with a traceback."""
    done = subprocess.run(
        [
            sys.executable,
            str(BENCH / "faults.py"),
            "--dir",
            str(tmp_path),
            "--json",
            "--seed",
            "1",
            "--faults",
            "write:ENOSPC:1+,pwrite64:ENOSPC:5+2,fdatasync:EIO:7+3,rename:EIO:6",
            "--tmpfs",
            "1" if os.geteuid() == 0 else "0",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.stdout.strip(), done.stderr
    figures = orjson.loads(done.stdout)
    assert figures["unclean"] == 0, figures["details"]
    assert figures["trials"] >= 4
    assert figures["outcomes"].get("exit 3") == 1  # every write failing: refused up front
    assert done.returncode == 0
