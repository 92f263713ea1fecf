"""Stop, pause, resume and pick-up of a lane's runs (SPEC §23): they work on its key as
on any key, and a paused lane goes on in its own worktree."""

from __future__ import annotations

import os
from pathlib import Path

from tests.conftest import CLI
from tests.lanes.conftest import commit_flow, events, runs_of
from tests.waiting import wait_for

STEERED = """
import os, time
from flowdrop_tui import flow

@flow(resumable=True)
def main(run):
    for _ in run.rounds(range(3)):
        with open("rounds.txt", "a") as out:
            out.write(f"{{run.round}} {{os.getcwd()}}\\n")
        while os.path.exists({hold!r}):
            time.sleep(0.05)
"""


def status(cli: CLI, run_id: str) -> str:
    return str(cli.json("show", run_id)["status"])


def started_round(ws: Path, run_id: str, number: int) -> bool:
    found = [e for e in events(ws, run_id) if e["event"] == "round_started"]
    return len(found) >= number


def test_pause_resume_and_stop_a_lane(workspace: Path, lanes_dir: Path, cli: CLI) -> None:
    hold = workspace.parent / "hold"
    hold.write_text("")
    commit_flow(workspace, "steer", STEERED.format(hold=str(hold)))
    one = str(cli.json("run", "steer@1", "--detach")["run"])
    two = str(cli.json("run", "steer", "--lane", "2", "--detach")["run"])
    wait_for(lambda: started_round(workspace, one, 1) and started_round(workspace, two, 1))
    cli("pause", one, check=0)
    cli("pause", two, check=0)
    hold.unlink()
    wait_for(lambda: status(cli, one) == "paused" and status(cli, two) == "paused")
    ended = events(workspace, two)[-1]
    assert ended["event"] == "paused" and ended["git"]["branch"] == "flowdrop/steer/2"
    # resumed: it goes on in its lane's worktree, round 2 on
    done = cli("resume", one, check=0)
    assert "completed (rounds 1–3)" in done.stderr and "warning" not in done.stderr, done.stderr
    tree = os.path.realpath(lanes_dir / "steer" / "1")
    lines = (Path(tree) / "rounds.txt").read_text().splitlines()
    assert [line.split()[0] for line in lines] == ["1", "2", "3"]
    assert {os.path.realpath(line.split()[1]) for line in lines} == {tree}
    # a paused lane closed by stop: cancelled, its git facts its worktree's
    cli("stop", two, check=0)
    wait_for(lambda: status(cli, two) == "cancelled")
    assert events(workspace, two)[-1]["git"]["branch"] == "flowdrop/steer/2"
    # a running lane stopped; its next run picks up from it, in its own thread
    hold.write_text("")
    three = str(cli.json("run", "steer@1", "--detach")["run"])
    wait_for(lambda: started_round(workspace, three, 1))
    cli("stop", three, check=0)
    hold.unlink()
    wait_for(lambda: status(cli, three) == "cancelled")
    done = cli("run", "steer@1", check=0)
    assert f"picked up from {three}, round 5" in done.stderr, done.stderr
    assert "warning" not in done.stderr, done.stderr
    newest = runs_of(cli, "steer@1")[0]
    assert newest["first_round"] == 5 and newest["status"] == "completed"
