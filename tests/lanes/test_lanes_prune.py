"""``prune`` and lanes (SPEC §16, §23): it drops the worktrees of lanes landed or
merged and clean, by ``lanes drop``'s rule, and no other; its runs stay by prune's
own rules (each lane's last run always: the records keep knowing the lane)."""

from __future__ import annotations

from pathlib import Path

from flowdrop_tui.core.lanes import lane_log
from flowdrop_tui.core.paths import Layout
from tests.conftest import CLI
from tests.lanes.lane_repo import git, lane_path, lanes_home, run_lane, seed

__all__ = ["lanes_home"]


def test_prune_drops_only_landed_or_merged_clean_lanes(
    workspace: Path, cli: CLI, lanes_home: Path
) -> None:
    """Guards prune's part: merged+clean and landed+clean go; unmerged, dirty, and a
    landed lane whose commits are not in its base stay; --dry-run moves nothing."""
    seed(workspace)
    keys = ("commits@1", "commits@2", "commits@3", "leaves@1", "idle@1")
    for key in keys:
        run_lane(cli, key)
    git(workspace, "merge", "-q", "--no-ff", "-m", "land 1", "flowdrop/commits/1")
    layout = Layout(workspace)
    # landed by squash: its commit is not the lane's, so the lane's own stays unmerged
    lane_log.append(layout, "commits@3", "landed", into="main", method="squash", commit="x")
    lane_log.append(layout, "leaves@1", "landed", into="main", method="merge", commit="y")
    paths = {key: lane_path(workspace, key) for key in keys}
    dry = cli.json("prune", "--dry-run")
    assert sorted(lane["key"] for lane in dry["lanes"]) == ["commits@1", "idle@1"]
    assert all(path.exists() for path in paths.values())
    done = cli.json("prune")
    assert sorted(lane["key"] for lane in done["lanes"]) == ["commits@1", "idle@1"]
    assert {"delete", "kept", "orphans", "bytes"} <= set(done)  # the old keys stay
    gone = {key for key, path in paths.items() if not path.exists()}
    assert gone == {"commits@1", "idle@1"}
    rows = {row["key"]: row for row in cli.json("lanes")}
    assert rows["commits@1"]["dropped"] and rows["commits@1"]["run"]  # its last run stays
    assert cli.json("prune")["lanes"] == []  # nothing more to drop
