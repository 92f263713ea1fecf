"""Lanes under load and kills (SPEC §23): batch after batch of lanes leaves no failed
run, no git lock and nothing git knows that the records do not; a run killed while its
lane's worktree is being made leaves nothing unrecorded, and the lane runs again."""

from __future__ import annotations

import os
import random
import signal
import time
from collections.abc import Callable
from pathlib import Path

from tests.conftest import CLI
from tests.lanes.conftest import commit_flow, events, git, git_locks, unknown_to_records
from tests.waiting import wait_for

QUICK = """
from flowdrop_tui import flow

@flow(resumable=True)
def main(run):
    for _ in run.rounds(range(1)):
        run.state["n"] = run.state.get("n", 0) + 1
"""


def ended(ws: Path, run_id: str) -> bool:
    found = events(ws, run_id)
    return bool(found) and found[-1]["event"] == "ended"


def test_lanes_4_started_25_times(workspace: Path, lanes_dir: Path, cli: CLI) -> None:
    commit_flow(workspace, "quick", QUICK)
    started: list[str] = []
    for _ in range(25):
        rows = cli.json("run", "quick", "--lanes", "4")
        batch = [str(row["run"]) for row in rows]
        assert all(batch), rows
        wait_for(lambda b=batch: all(ended(workspace, r) for r in b), timeout=60, what="a batch")
        started += batch
    outcomes = {events(workspace, r)[-1]["outcome"] for r in started}
    assert outcomes == {"completed"}
    assert [events(workspace, r)[-1]["round"] for r in started[-4:]] == [25] * 4
    assert git_locks(workspace) == []
    assert unknown_to_records(workspace) == (set(), set())
    listed = git(workspace, "worktree", "list").splitlines()
    assert len(listed) == 5, listed


def big_tree(ws: Path, files: int = 3000) -> None:
    """A tree whose checkout takes long enough for a kill to land inside it."""
    for n in range(files):
        folder = ws / "tree" / f"d{n % 60}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"f{n}.txt").write_text(f"{n}\n" * 20)
    git(ws, "add", "-A")
    git(ws, "commit", "-q", "-m", "a big tree")


def test_kill_9_while_the_worktree_is_made(workspace: Path, lanes_dir: Path, cli: CLI) -> None:
    big_tree(workspace)
    commit_flow(workspace, "big", QUICK)
    runs = workspace / ".flowdrop" / "runs"

    def tree(n: int) -> Path:
        return lanes_dir / "big" / str(n)

    moments = [
        ("the record exists", lambda n: any(runs.glob("*/cycle.jsonl"))),
        ("the worktree's folder exists", lambda n: tree(n).exists()),
        ("its checkout has begun", lambda n: (tree(n) / "tree").exists()),
        ("its files are half there", lambda n: (tree(n) / "tree" / "d30").exists()),
    ]
    rng = random.Random(os.getpid())
    moments += [(f"{d:.2f} s in", _after(d)) for d in (rng.uniform(0.05, 1.5) for _ in range(3))]
    for n, (what, moment) in enumerate(moments, 1):  # each kill meets a new lane's making
        child = cli.start("run", f"big@{n}")
        begun = time.monotonic()
        wait_for(lambda n=n, m=moment, c=child: m(n) or c.poll() is not None, timeout=60, what=what)
        if child.poll() is None:  # (a run that ended first was met by no kill: still checked)
            os.kill(child.pid, signal.SIGKILL)
        child.wait(timeout=30)
        # what git knows, the records know, whatever instant the kill met
        assert unknown_to_records(workspace) == (set(), set()), (what, time.monotonic() - begun)
    rows = cli.json("run", "big", "--lanes", str(len(moments)))  # each lane again
    wait_for(
        lambda: all(ended(workspace, str(row["run"])) for row in rows), timeout=120, what="lanes"
    )
    for n, row in enumerate(rows, 1):
        assert events(workspace, str(row["run"]))[-1]["outcome"] == "completed", row
        assert git(tree(n), "status", "--porcelain") == ""
        assert (tree(n) / "tree" / "d59" / "f2999.txt").exists()
    assert unknown_to_records(workspace) == (set(), set())
    wait_for(lambda: git_locks(workspace) == [], timeout=60, what="git's locks let go")


def _after(seconds: float) -> Callable[[int], bool]:
    """A moment ``seconds`` after the run began (counted from its first look)."""
    began: list[float] = []

    def reached(_: int) -> bool:
        began[:] = began or [time.monotonic()]
        return time.monotonic() - began[0] >= seconds

    return reached
