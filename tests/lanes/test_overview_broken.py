"""``lanes`` (SPEC §23, "Seeing lanes") when one lane's worktree is broken: that row
says so, every other lane is listed, and the command succeeds."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import CLI
from tests.lanes.lane_repo import lane_path, lanes_home, run_lane, seed

__all__ = ["lanes_home"]


def test_a_broken_worktree_is_one_rows_note(workspace: Path, cli: CLI, lanes_home: Path) -> None:
    """Guards `lanes` when one lane's worktree is broken: its row says so, the others
    are listed, exit 0."""
    seed(workspace)
    run_lane(cli, "commits@1")
    run_lane(cli, "idle@1")
    (lane_path(workspace, "commits@1") / ".git").write_text("gitdir: /nonexistent/x\n")
    rows = {row["key"]: row for row in cli.json("lanes")}
    assert rows["commits@1"]["dirty"] is None and "repair" in rows["commits@1"]["note"]
    assert rows["idle@1"]["dirty"] is False
    assert "broken" in cli("lanes", check=0).stdout
