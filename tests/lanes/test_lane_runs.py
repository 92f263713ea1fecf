"""A lane's run, end to end (SPEC §23): its own rounds, state and worktree; the main
checkout untouched; and no warning that belongs to a path key or another checkout."""

from __future__ import annotations

import os
from pathlib import Path

from tests.conftest import CLI
from tests.lanes.conftest import COUNTER, commit_flow, events, git, runs_of
from tests.waiting import wait_for


def rounds_said(done: object) -> str:
    text = str(getattr(done, "stderr", ""))
    line = [row for row in text.splitlines() if " completed (" in row]
    assert line, text
    return line[-1].split("(", 1)[1].rstrip(")")


def test_each_lane_counts_and_picks_up_its_own(workspace: Path, lanes_dir: Path, cli: CLI) -> None:
    commit_flow(workspace, "count", COUNTER)
    assert rounds_said(cli("run", "count@1", check=0)) == "rounds 1–3"
    assert rounds_said(cli("run", "count", "--lane", "1", check=0)) == "rounds 4–6"
    assert rounds_said(cli("run", "count@2", check=0)) == "rounds 1–3"
    one, two = lanes_dir / "count" / "1", lanes_dir / "count" / "2"
    lane_files = {path: path.read_text() for path in (one / "rounds.txt", two / "rounds.txt")}
    assert [line.split()[0] for line in lane_files[one / "rounds.txt"].splitlines()] == [
        "1",
        "2",
        "3",
        "4",
        "5",
        "6",
    ]
    assert rounds_said(cli("run", "count", check=0)) == "rounds 1–3"  # the flow's own thread
    assert {path: path.read_text() for path in lane_files} == lane_files
    assert (workspace / "rounds.txt").read_text().split()[0] == "1"
    state = {row["flow"]: row["last_round"] for row in reversed(runs_of(cli))}  # newest wins
    assert state == {"count": 3, "count@1": 6, "count@2": 3}


def test_the_flow_works_in_the_lane_worktree_and_leaves_the_checkout(
    workspace: Path, lanes_dir: Path, cli: CLI
) -> None:
    commit_flow(workspace, "count", COUNTER)
    before = git(workspace, "status", "--porcelain")
    head = git(workspace, "rev-parse", "HEAD")
    cli("run", "count@a", check=0)
    tree = os.path.realpath(lanes_dir / "count" / "a")
    for line in (Path(tree) / "rounds.txt").read_text().splitlines():
        _, cwd, seen = line.split()
        assert os.path.realpath(cwd) == tree and os.path.realpath(seen) == tree
    assert git(workspace, "status", "--porcelain") == before
    assert git(workspace, "rev-parse", "HEAD") == head
    assert git(workspace, "branch", "--show-current").strip() == "main"
    assert git(Path(tree), "branch", "--show-current").strip() == "flowdrop/count/a"
    run = runs_of(cli, "count@a")[0]["run"]
    lane = events(workspace, run)[0]["lane"]
    assert os.path.realpath(lane["path"]) == tree and lane["base_branch"] == "main"


def test_no_wrong_warnings_and_a_lane_shows_its_own_commits(
    workspace: Path, lanes_dir: Path, cli: CLI
) -> None:
    commit_flow(workspace, "count", COUNTER)
    first = cli("run", "count@2", check=0)
    again = cli("run", "count@2", check=0)
    for done in (first, again):
        assert "warning" not in done.stderr, done.stderr
    plan = cli.json("plan", "count@2")
    assert plan["warnings"] == [] and not plan["drift"]["drifted"], plan
    # a commit in the lane: the lane's next run and show RUN see the lane's, not main's
    tree = lanes_dir / "count" / "2"
    (tree / "made.txt").write_text("x\n")
    git(tree, "add", "made.txt")
    git(tree, "commit", "-q", "-m", "in the lane")
    done = cli("run", "count@2", check=0)
    assert "branch changed" not in done.stderr and "HEAD moved" in done.stderr, done.stderr
    run = runs_of(cli, "count@2")[0]["run"]
    shown = cli.json("show", run)
    assert shown["git"]["start"]["branch"] == "flowdrop/count/2"
    assert cli("run", "count", check=0).stderr.count("warning") == 0


COMMITS = """
import subprocess
from flowdrop_tui import flow

@flow(resumable=True)
def main(run):
    for _ in run.rounds(range(1)):
        with open("made.txt", "w") as out:
            out.write("made in the lane\\n")
        subprocess.run(["git", "add", "made.txt"], check=True)
        subprocess.run(["git", "commit", "-q", "-m", "a lane's round"], check=True)
"""


def test_show_and_diff_of_a_lane_run_are_the_lanes(
    workspace: Path, lanes_dir: Path, cli: CLI
) -> None:
    commit_flow(workspace, "commits", COMMITS)
    git(workspace, "config", "user.name", "t")
    git(workspace, "config", "user.email", "t@t")
    cli("run", "commits@1", check=0)
    run = runs_of(cli, "commits@1")[0]["run"]
    shown = cli.json("show", run)
    assert [c["summary"] for c in shown["git"]["commits"]] == ["a lane's round"], shown["git"]
    diff = cli.json("diff", run)
    assert [row["path"] for row in diff["files"]] == ["made.txt"], diff
    assert "made in the lane" in diff["patch"]
    assert not (workspace / "made.txt").exists()
    assert git(workspace, "log", "--format=%s", "-1").strip() == "flow commits"


LIVE_COMMITTER = """
import subprocess
from pathlib import Path

from flowdrop_tui import flow


@flow
def main(run):
    for r in run.rounds(range(4)):
        Path("out.txt").write_text(f"round {r}\\n")
        if r < 2:
            subprocess.run(["git", "add", "out.txt"], check=True)
            subprocess.run(
                ["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", f"r{r}"],
                check=True,
            )
        else:
            while not Path("go").exists():  # the round in flight, until the test says go
                run.log("waiting")
                subprocess.run(["sleep", "0.05"])
"""


def test_a_live_lanes_round_in_flight_is_diffed_in_its_worktree(
    workspace: Path, lanes_dir: Path, cli: CLI
) -> None:
    """The record's git facts are the lane's start: a round in flight is compared with
    the worktree's HEAD now, never reversed against the base (it showed 'deleted')."""
    commit_flow(workspace, "committer", LIVE_COMMITTER)
    run = cli.json("run", "committer@1", "--detach")["run"]
    tree = lanes_dir / "committer" / "1"
    wait_for(
        lambda: any(e.get("event") == "log" for e in events(workspace, run)),
        what="round 3",
        timeout=60,
    )
    shown = cli.json("diff", run)
    assert shown["round"] == 3 and shown["uncommitted"], shown
    assert [row["path"] for row in shown["files"]] == ["out.txt"], shown
    assert "+round 2" in shown["patch"] and "deleted" not in str(shown["files"]), shown
    (tree / "go").write_text("")
    wait_for(
        lambda: runs_of(cli, "committer@1")[0]["status"] == "completed", what="the end", timeout=60
    )
