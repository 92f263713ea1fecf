"""``run FLOW --lanes N``, ``--lane NAME`` and ``@flow(lanes=N)`` (SPEC §23): lanes
started detached side by side, one line each, a refused one named while the others
start; and lanes started by racing processes, one start per key, nothing broken."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import orjson

from tests.conftest import CLI
from tests.lanes.conftest import COUNTER, commit_flow, git_locks, runs_of, unknown_to_records
from tests.waiting import wait_for

HELD = """
import os, time
from flowdrop_tui import flow

@flow(resumable=True{declared})
def main(run):
    for _ in run.rounds(range(1)):
        while os.path.exists({hold!r}):
            time.sleep(0.05)
"""


def all_ended(cli: CLI, count: int, prefix: str) -> list[dict[str, Any]]:
    def ended() -> list[dict[str, Any]] | None:
        rows = [row for row in runs_of(cli) if str(row["flow"]).startswith(prefix)]
        done = len(rows) == count and all(row["status"] not in ("running",) for row in rows)
        return rows if done else None

    rows: list[dict[str, Any]] = wait_for(ended, timeout=90, what=f"{count} runs of {prefix} ended")
    return rows


def test_lanes_n_starts_each_lane_detached(workspace: Path, lanes_dir: Path, cli: CLI) -> None:
    commit_flow(workspace, "count", COUNTER)
    rows = cli.json("run", "count", "--lanes", "3")
    assert [(r["flow"], r["lane"], r["key"]) for r in rows] == [
        ("count", str(n), f"count@{n}") for n in (1, 2, 3)
    ]
    ended = all_ended(cli, 3, "count@")
    assert {r["run"] for r in ended} == {r["run"] for r in rows}
    assert all(r["status"] == "completed" and r["last_round"] == 3 for r in ended)
    text = cli("run", "count", "--lanes", "2", check=0).stdout.splitlines()
    assert [line.split()[0] for line in text] == ["count@1", "count@2"]
    all_ended(cli, 5, "count@")
    by_path = cli.json("run", "flows/count", "--lanes", "1")  # a path's lane stays a lane
    assert by_path[0]["key"] == "flows/count@1"
    assert all_ended(cli, 1, "flows/count@1")[0]["status"] == "completed"
    for bad in (["--lanes", "0"], ["--lanes", "2", "--lane", "1"], ["--lanes", "65"]):
        done = cli("run", "count", *bad, "--json", check=2)
        assert orjson.loads(done.stdout)["error"]["code"] == "USAGE", bad
    done = cli("run", "count@1", "--lanes", "2", "--json", check=2)
    assert orjson.loads(done.stdout)["error"]["code"] == "USAGE"


def test_declared_lanes_and_a_refused_lane(workspace: Path, lanes_dir: Path, cli: CLI) -> None:
    hold = workspace.parent / "hold"
    hold.write_text("")
    commit_flow(workspace, "wide", HELD.format(declared=", lanes=3", hold=str(hold)))
    started = cli("run", "wide", "--lane", "2", "--detach", "--json", check=0)
    only = orjson.loads(started.stdout)["run"]
    wait_for(lambda: runs_of(cli, "wide@2") and runs_of(cli, "wide@2")[0]["status"] == "running")
    done = cli("run", "wide", "--json", check=3)  # @flow(lanes=3): a plain run starts them
    rows = orjson.loads(done.stdout)
    assert [r["key"] for r in rows] == ["wide@1", "wide@2", "wide@3"]
    assert rows[1]["run"] is None and rows[1]["error"]["code"] == "ALREADY_RUNNING"
    assert rows[0]["run"] and rows[2]["run"]
    said = cli("run", "wide", check=3)
    assert said.stdout == "" and said.stderr.count("refused (ALREADY_RUNNING)") == 3
    hold.unlink()
    ended = all_ended(cli, 3, "wide@")
    assert only in {r["run"] for r in ended}
    assert all(r["status"] == "completed" for r in ended)
    assert "completed (rounds 2)" in cli("run", "wide@2", check=0).stderr  # one lane alone


def test_lanes_started_by_racing_processes(workspace: Path, lanes_dir: Path, cli: CLI) -> None:
    hold = workspace.parent / "hold"
    hold.write_text("")
    commit_flow(workspace, "race", HELD.format(declared="", hold=str(hold)))
    commit_flow(workspace, "twice", HELD.format(declared="", hold=str(hold)))
    racing: list[subprocess.Popen[str]] = [cli.start("run", "race", "--lanes", "4", "--json")]
    racing += [cli.start("run", f"race@{n}", "--detach", "--json") for n in range(5, 9)]
    both = [cli.start("run", "twice", "--lanes", "4", "--json") for _ in range(2)]
    for process in racing + both:
        process.wait(timeout=120)
    assert [p.returncode for p in racing] == [0] * 5, [p.stderr.read() for p in racing if p.stderr]
    rows = [orjson.loads(p.stdout.read()) for p in both if p.stdout]
    assert {p.returncode for p in both} <= {0, 3} and 3 in {p.returncode for p in both}
    for n in range(4):  # each lane started once; its other start refused, as running
        pair = [lanes[n] for lanes in rows]
        assert sorted(bool(one["run"]) for one in pair) == [False, True], pair
        refused = next(one for one in pair if not one["run"])
        assert refused["error"]["code"] == "ALREADY_RUNNING", refused
    hold.unlink()
    ended = all_ended(cli, 8, "race@") + all_ended(cli, 4, "twice@")
    assert all(r["status"] == "completed" for r in ended), ended
    assert unknown_to_records(workspace) == (set(), set())
    assert git_locks(workspace) == []
