"""`stop` of a paused run (issue 27, item 5): the closing `ended` is the fact a later
`resume` decides on, so it is durable before `stop` says "closed cancelled" — and when
it cannot be written (a full disk), `stop` says so and claims nothing.

The full disk: the real `stop` under `strace`, every `write` to the run's
`cycle.jsonl` failing with ENOSPC (`-P` names the file). The power cut: real
loop-mounted ext4 (journaled, `commit=600`), ext4 without a journal and ext2, as in
tests/harnesses/test_powercut_pins.py. Each is skipped, saying why, where it is impossible.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import orjson
import pytest

from tests.harnesses import powercut_disk
from tests.harnesses.powercut_disk import (
    FLOW,
    Disk,
    can_strace,
    cut_env,
    power_back,
    power_cut,
    run_cli,
)

disk = powercut_disk.disk  # the fixture: one case per filesystem

WHY_STRACE = can_strace()


@pytest.fixture
def env() -> dict[str, str]:
    return cut_env(PC_ROUNDS="1", PC_PAUSE="1")


def paused_run(ws: Path, env: dict[str, str]) -> str:
    done = run_cli(ws, "run", "count", env=env)
    assert done.returncode == 0 and "paused" in done.stderr, done.stderr
    found = re.search(r"^run (\S+) paused", done.stderr, re.M)
    assert found, done.stderr
    return found.group(1)


def events(ws: Path, run_id: str) -> list[str]:
    """The record's events, in order (a line a power cut left unreadable skipped)."""
    found = []
    for line in (ws / ".flowdrop" / "runs" / run_id / "cycle.jsonl").read_bytes().splitlines():
        try:
            found.append(orjson.loads(line)["event"])
        except (orjson.JSONDecodeError, KeyError, TypeError):
            continue
    return found


def test_a_closed_paused_run_stays_closed_after_a_power_cut(
    disk: Disk, env: dict[str, str]
) -> None:
    """Guards against the run back `paused` after a power cut right after `stop` said
    "closed" (8 of 8 in the issue): its `ended` was appended but never synced."""
    run_id = paused_run(disk.ws, env)
    disk.settle()  # the paused run is on disk; only the close is in question
    closed = run_cli(disk.ws, "stop", run_id, env=env)
    assert closed.returncode == 0 and "closed" in closed.stdout, closed.stdout + closed.stderr
    copy = power_cut(disk)
    try:
        assert events(copy, run_id)[-2:] == ["stop_requested", "ended"]
        shown = run_cli(copy, "show", run_id, "--json", env=env)
        assert shown.returncode == 0 and '"status":"cancelled"' in shown.stdout.replace(" ", "")
        again = run_cli(copy, "resume", run_id, env=env)
        assert again.returncode == 3 and "ended" in again.stderr, again.stderr
    finally:
        power_back(disk)


@pytest.mark.skipif(WHY_STRACE is not None, reason=f"I/O-fault harness: {WHY_STRACE}")
def test_stop_of_a_paused_run_on_a_full_disk_says_so_and_claims_nothing(
    tmp_path: Path, env: dict[str, str]
) -> None:
    """Guards against "closed cancelled", exit 0, when nothing was written (the issue):
    the error names the record, exit 3 (RECORDS_UNWRITABLE), the run stays paused with
    its record as it was, and it resumes once the disk has room."""
    ws = tmp_path / "ws"
    subprocess.run(["git", "init", "-q", str(ws)], check=True)
    (ws / "flows" / "count").mkdir(parents=True)
    (ws / "flows" / "count" / "flow.py").write_text(textwrap.dedent(FLOW))
    run_id = paused_run(ws, env)
    record = ws / ".flowdrop" / "runs" / run_id / "cycle.jsonl"
    before = record.read_bytes()
    inject = ["strace", "-qq", "-o", os.devnull, "-f", "-P", str(record), "-e", "trace=write"]
    inject += ["-e", "inject=write:error=ENOSPC"]
    full = subprocess.run(
        [*inject, sys.executable, "-m", "flowdrop_tui", "stop", run_id],
        cwd=ws,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert full.returncode == 3, full.stdout + full.stderr
    assert "closed" not in full.stdout, full.stdout
    assert str(record) in full.stderr and "still paused" in full.stderr, full.stderr
    assert "Traceback" not in full.stderr
    assert record.read_bytes() == before  # nothing claimed, nothing half-written
    listed = run_cli(ws, "runs", "count", "--json", env=env)
    assert f'"{run_id}"' in listed.stdout and '"paused"' in listed.stdout, listed.stdout
    # the disk has room again: the same stop closes it
    closed = run_cli(ws, "stop", run_id, env=env)
    assert closed.returncode == 0 and "closed" in closed.stdout, closed.stderr
    assert events(ws, run_id)[-2:] == ["stop_requested", "ended"]
