"""The UI's reads in a child process are given up when no longer wanted, and a cold
ledger is kept as it is learnt (issue 28: ``q`` waited ~45 s for the size count on a
cold 100,000-run workspace, and the count started over on every open)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest

from flowdrop_tui.core import git
from flowdrop_tui.core.child_read import child_output
from flowdrop_tui.core.paths import Layout
from flowdrop_tui.core.records.listing import ledger
from flowdrop_tui.core.records.listing.ledger import Ledger, isolated_usage, workspace_usage
from tests.seeded_records import seed_run

SLEEPER = "import os, sys, time; open(sys.argv[1], 'w').write(str(os.getpid())); time.sleep(600)"


def gone(pid: int) -> bool:
    """``pid`` has exited (a zombie of ours counts: ``subprocess`` reaps it later)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def until_gone(pid: int) -> bool:
    deadline = time.monotonic() + 60  # a hang guard, not a speed goal
    while not gone(pid):
        assert time.monotonic() < deadline, f"{pid} still runs"
        time.sleep(0.02)
    return True


def test_a_cancelled_read_kills_its_child_and_answers_none(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    answer = child_output(
        [sys.executable, "-c", SLEEPER, str(pid_file)],
        timeout=600,
        cancelled=pid_file.exists,  # wanted until the child is surely running
    )
    assert answer is None
    pid = int(pid_file.read_text())
    assert until_gone(pid)  # told to stop, and it did


def test_a_read_past_its_deadline_kills_its_child(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    assert child_output([sys.executable, "-c", SLEEPER, str(pid_file)], timeout=0.5) is None
    assert until_gone(int(pid_file.read_text()))


def test_a_read_answers_what_the_child_printed(tmp_path: Path) -> None:
    assert child_output([sys.executable, "-c", "print('x' * 200_000)"], timeout=60) == (
        b"x" * 200_000 + b"\n"
    )
    assert child_output([str(tmp_path / "no-such-program")], timeout=60) is None


def test_cancelled_usage_and_git_reads_answer_none(workspace: Path) -> None:
    layout = Layout(workspace)
    seed_run(workspace, "20260817T010000.000Z-aaaaaa", "tick")
    assert isolated_usage(layout) == workspace_usage(layout)
    assert isolated_usage(layout, cancelled=lambda: True) is None
    assert git.isolated(workspace, "facts", cancelled=lambda: True) is None


def test_a_cold_ledger_is_kept_as_it_is_learnt(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A count killed part way (the UI quit) leaves what it learnt: the next goes on."""
    layout = Layout(workspace)
    ids = [f"20260817T01{m:02d}00.000Z-aaaaaa" for m in range(3)]
    for minute, run_id in enumerate(ids):
        seed_run(workspace, run_id, "tick", minute=minute)
    monkeypatch.setattr(ledger, "SAVE_EVERY", 0.0)
    learning = Ledger(layout)
    learning.facts(ids)  # never saved by its caller: as if killed after the last run
    kept = orjson.loads((layout.cache / "runs.json").read_bytes())["runs"]
    assert sorted(kept) == ids


def test_a_count_stopped_part_way_keeps_what_it_learnt(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The size count's child leaves on SIGTERM (``sys.exit`` from its handler): the
    runs it had classified are saved on the way out."""
    layout = Layout(workspace)
    ids = [f"20260817T01{m:02d}00.000Z-aaaaaa" for m in range(4)]
    for minute, run_id in enumerate(ids):
        seed_run(workspace, run_id, "tick", minute=minute)
    classify = ledger.classify
    seen: list[str] = []

    def stopped_at_the_third(layout: Layout, run_id: str) -> ledger.RunFacts:
        if len(seen) == 2:
            raise SystemExit(143)
        seen.append(run_id)
        return classify(layout, run_id)

    monkeypatch.setattr(ledger, "classify", stopped_at_the_third)
    with pytest.raises(SystemExit):
        workspace_usage(layout)
    kept = orjson.loads((layout.cache / "runs.json").read_bytes())["runs"]
    assert sorted(kept) == ids[:2]


def test_reindex_builds_the_ledger(workspace: Path) -> None:
    """After ``reindex`` (an upgrade, a copied workspace) the UI's first open has no
    cold count to make: every ended run's facts are kept."""
    ids = [f"20260817T01{m:02d}00.000Z-aaaaaa" for m in range(3)]
    for minute, run_id in enumerate(ids):
        seed_run(workspace, run_id, "tick", minute=minute)
    layout = Layout(workspace)
    (layout.cache / "runs.json").unlink(missing_ok=True)
    done = subprocess.run(
        [sys.executable, "-m", "flowdrop_tui", "reindex"],
        cwd=workspace,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    kept = orjson.loads((layout.cache / "runs.json").read_bytes())["runs"]
    assert sorted(kept) == ids
