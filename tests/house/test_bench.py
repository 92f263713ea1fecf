"""The benchmarks run: each script, in --quick mode, prints its ratio.

No timing is asserted here (speed goals are read from the bench output, on a
quiet machine); this only guards against a bench that no longer runs.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
RATIO = re.compile(r"ratio \([^)]*\): (\d+\.\d+)")


def quick(script: str, tmp_path: Path) -> str:
    done = subprocess.run(
        [sys.executable, str(BENCH / script), "--quick", "--dir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_state_write_prints_a_ratio(tmp_path: Path) -> None:
    """Guards against bench/state_write.py breaking (it needs the bench extra)."""
    pytest.importorskip("langgraph.checkpoint.sqlite", reason="pip install -e '.[bench]'")
    out = quick("state_write.py", tmp_path)
    match = RATIO.search(out)
    assert match and float(match.group(1)) > 0, out
    assert "synchronous=2" in out and re.search(r"goal <= 1\.0: (met|NOT met)", out), out


def test_langgraph_put_prints_a_ratio(tmp_path: Path) -> None:
    """Guards against bench/langgraph_put.py breaking (SPEC §22; the langgraph extra)."""
    pytest.importorskip("langgraph.checkpoint.sqlite", reason="pip install -e '.[langgraph]'")
    out = quick("langgraph_put.py", tmp_path)
    match = RATIO.search(out)
    assert match and float(match.group(1)) > 0, out
    assert "the log alone" in out and re.search(r"goal <= 1\.0: (met|NOT met)", out), out


def test_resolve_prints_a_ratio(tmp_path: Path) -> None:
    """Guards against bench/resolve.py breaking, or its workspaces no longer resolving."""
    out = quick("resolve.py", tmp_path)
    match = RATIO.search(out)
    assert match and float(match.group(1)) > 0, out
    assert re.search(r"goal <= 1\.2: (met|NOT met)", out), out


def test_inbox_prints_a_ratio(tmp_path: Path) -> None:
    """Guards against bench/inbox.py breaking (SPEC §21: the inbox reads the index)."""
    out = quick("inbox.py", tmp_path)
    assert re.search(r"ratio \d+\.\d+ .*goal <= 1\.2: (met|NOT met)", out), out


@pytest.mark.parametrize("script", ["runs_page.py", "describe_cold.py"])
def test_paging_and_cold_listing_benches_print_ratios(script: str) -> None:
    """Guards against bench/runs_page.py or bench/describe_cold.py breaking."""
    done = subprocess.run(
        [sys.executable, str(BENCH / script), "--quick"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert re.search(r"ratio \d+\.\d+.*goal ≤ \d\.\d: (met|NOT met)", done.stdout), done.stdout


def test_prune_prints_a_ratio_and_leaves_what_the_rules_say(tmp_path: Path) -> None:
    """Guards against bench/prune.py breaking, or a prune at scale leaving the wrong runs,
    changing a key's pick-up answer, or a stale index (it exits 1 then)."""
    out = quick("prune.py", tmp_path)
    match = RATIO.search(out)
    assert match and float(match.group(1)) > 0, out
    assert "PROBLEMS" not in out and out.count("; OK") == 2, out


def test_remote_keyset_prints_a_ratio(tmp_path: Path) -> None:
    """Guards against bench/remote_keyset.py breaking (it starts its own PostgreSQL)."""
    done = subprocess.run(
        [
            sys.executable,
            str(BENCH / "remote_keyset.py"),
            "--quick",
            "--no-fsync",
            "--dir",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    match = RATIO.search(done.stdout)
    assert match and float(match.group(1)) > 0, done.stdout
    assert "fenced write alone" in done.stdout


def test_remote_reads_prints_a_ratio(tmp_path: Path) -> None:
    """Guards against bench/remote_reads.py breaking (it starts its own PostgreSQL)."""
    out = quick("remote_reads.py", tmp_path)
    match = RATIO.search(out)
    assert match and float(match.group(1)) > 0, out
    assert "seen by a follower elsewhere" in out


def test_worker_loss_prints_a_ratio(tmp_path: Path) -> None:
    """Guards against bench/worker_loss.py breaking (real Temporal, PostgreSQL, workers)."""
    out = quick("worker_loss.py", tmp_path)
    match = RATIO.search(out)
    assert match and float(match.group(1)) > 0, out


def test_remote_start_prints_a_ratio(tmp_path: Path) -> None:
    """Guards against bench/remote_start.py breaking (real Temporal, PostgreSQL, a worker)."""
    out = quick("remote_start.py", tmp_path)
    match = RATIO.search(out)
    assert match and float(match.group(1)) > 0, out
    assert re.search(r"goal <= 1\.5: (met|NOT met)", out), out


def test_round_moves_prints_the_cost_per_round(tmp_path: Path) -> None:
    """Guards against bench/round_moves.py (SPEC §20's cost per round) breaking."""
    out = quick("round_moves.py", tmp_path)
    agent = r"added per agent round on [\d,]+ files: \d+\.\d ms; goal ≤ 20 ms: (met|NOT met)"
    plain = (
        r"added per round with no agent session on [\d,]+ files: [\d.]+ µs"
        r".*goal ≤ 1 ms: (met|NOT met)"
    )
    assert re.search(agent, out) and re.search(plain, out), out


def test_giant_record_prints_each_command(tmp_path: Path) -> None:
    """Guards against bench/giant_record.py (a 1 GB record's time and memory) breaking."""
    out = quick("giant_record.py", tmp_path)
    for name in (
        "stop RUN",
        "the run's end",
        "flows (warm)",
        "reindex (cold)",
        "run loop (pick-up",
    ):
        line = next((line for line in out.splitlines() if line.startswith(name)), "")
        assert re.search(r"\d+\.\d\d s +\d+\.\d MB", line) and "killed" not in line, out
