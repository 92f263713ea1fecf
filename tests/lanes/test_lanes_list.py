"""``lanes [FLOW] [--json]`` (SPEC §23, "Seeing lanes"): each lane's row, its values
read from the records, the lane's own log and git."""

from __future__ import annotations

from pathlib import Path

from flowdrop_tui.core.lanes import lane_log
from flowdrop_tui.core.paths import Layout
from tests.conftest import CLI, kill_live_runs, write_flow
from tests.lanes.lane_repo import git, lane_path, lanes_home, run_lane, seed
from tests.waiting import wait_for

__all__ = ["lanes_home"]

FIELDS = {
    "key", "flow", "lane", "status", "round", "run", "branch", "path", "base",
    "base_branch", "ahead", "behind", "dirty", "exists", "progress", "result",
    "tokens", "landed", "dropped", "note",
}  # fmt: skip


def test_a_lane_that_commits_is_ahead_and_clean(
    workspace: Path, cli: CLI, lanes_home: Path
) -> None:
    """Guards the row's shape and the values a committing lane's record and git give."""
    seed(workspace)
    row = run_lane(cli, "commits@1")
    assert set(row) == FIELDS
    base = git(workspace, "rev-parse", "HEAD")
    assert row["flow"] == "commits" and row["lane"] == "1"
    assert row["status"] == "completed" and row["round"] == 1 and row["run"]
    assert row["branch"] == "flowdrop/commits/1" and row["base"] == base
    assert row["base_branch"] == "main"
    assert (row["ahead"], row["behind"]) == (1, 0)
    assert row["exists"] is True and row["dirty"] is False
    assert row["progress"] == {"done": 1} and row["result"] == "committed"
    assert row["landed"] is None and row["dropped"] is False
    assert Path(row["path"]).is_relative_to(lanes_home)


def test_dirty_behind_and_landed(workspace: Path, cli: CLI, lanes_home: Path) -> None:
    """Guards dirty (an uncommitted change), behind (the base moved on), the landed
    event read from the lane's log, a flow filter and a lane whose worktree is gone."""
    seed(workspace)
    run_lane(cli, "leaves@1")
    git(workspace, "commit", "-q", "--allow-empty", "-m", "main moves on")
    row = cli.json("lanes", "leaves")[0]
    assert row["dirty"] is True and (row["ahead"], row["behind"]) == (0, 1)
    assert row["result"] == "left" and row["progress"] is None
    landed = {"into": "main", "method": "merge", "commit": "abc"}
    lane_log.append(Layout(workspace), "leaves@1", "landed", **landed)
    row = cli.json("lanes", "leaves")[0]
    assert row["landed"] == landed
    run_lane(cli, "idle@2")
    assert [r["key"] for r in cli.json("lanes")] == ["idle@2", "leaves@1"]
    git(workspace, "worktree", "remove", "--force", str(lane_path(workspace, "idle@2")))
    row = cli.json("lanes", "idle")[0]
    assert row["exists"] is False and row["dirty"] is None and row["dropped"] is False


def test_no_lanes_said_plainly(workspace: Path, cli: CLI, lanes_home: Path) -> None:
    """Guards the empty answer: how to start lanes, ``[]`` in JSON, and a flow that
    exists nowhere: exit 2, as every command says it."""
    seed(workspace)
    assert cli.json("lanes") == []
    said = cli("lanes", "idle", check=0).stdout
    assert "no lanes" in said and "flowdrop-tui run idle --lanes 3" in said
    assert cli("lanes", "nosuch", "--json", check=2).stdout.count("NOT_FOUND") == 1


def test_the_table(workspace: Path, cli: CLI, lanes_home: Path) -> None:
    """Guards the table's columns and one lane's cells."""
    seed(workspace)
    run_lane(cli, "commits@1")
    lines = cli("lanes", check=0).stdout.splitlines()
    assert lines[0].split()[:4] == ["LANE", "STATUS", "ROUND", "AHEAD/BEHIND"]
    assert lines[1].split()[:5] == ["commits@1", "completed", "1", "+1/-0", "clean"]


def test_flows_lists_lanes_after_their_flow(workspace: Path, cli: CLI, lanes_home: Path) -> None:
    """Guards ``flows`` (SPEC §11, §23): a flow's lanes right after it, ``lane`` naming
    the lane; every other row ``"lane": null``; the first frame's rows the same."""
    from flowdrop_tui.core.flow_list import quick_flow_rows

    seed(workspace)
    run_lane(cli, "idle@2")
    run_lane(cli, "idle@10")
    cli("run", "idle", check=0)
    rows = cli.json("flows")
    names = [(row["name"], row["lane"]) for row in rows]
    at = names.index(("idle", None))
    assert names[at : at + 3] == [("idle", None), ("idle@2", "2"), ("idle@10", "10")]
    assert all(row["lane"] is None for row in rows if "@" not in row["name"])
    lane = rows[at + 1]
    assert lane["status"] == "completed" and lane["round"] == 1 and lane["error"] is None
    quick = [(row["name"], row["lane"]) for row in quick_flow_rows(Layout(workspace))]
    assert [n for n in quick if n[0].startswith("idle")] == names[at : at + 3]


def test_a_killed_lane_run_shows_interrupted(workspace: Path, cli: CLI, lanes_home: Path) -> None:
    """Guards a lane whose run's process died: ``interrupted``, never ``running``."""
    seed(workspace)
    write_flow(
        workspace,
        "waits",
        """
        import time
        from flowdrop_tui import flow

        @flow()
        def main(run):
            for _ in run.rounds():
                time.sleep(0.05)
        """,
    )
    cli("run", "waits@1", "--detach", check=0)
    wait_for(lambda: cli.json("lanes", "waits")[0]["status"] == "running")
    assert kill_live_runs(workspace)
    wait_for(lambda: cli.json("lanes", "waits")[0]["status"] == "interrupted")
