"""How the CLI words lanes (SPEC §23): the table, a drop's answer, and prune's lines
for the lanes it dropped — in-process, from rows shaped as the core answers."""

from __future__ import annotations

from typing import Any

from flowdrop_tui.cli.laning import drop_text, lanes_text
from flowdrop_tui.format import prune_text

ROW: dict[str, Any] = {
    "key": "fixer@2", "flow": "fixer", "lane": "2", "status": "completed", "round": 4,
    "run": "r", "branch": "flowdrop/fixer/2", "path": "/l/fixer/2", "base": "b" * 40,
    "base_branch": "main", "ahead": 3, "behind": 1, "dirty": True, "exists": True,
    "progress": {"tests": 12}, "result": None, "tokens": 12_345,
    "landed": {"into": "main", "method": "squash", "commit": "c"}, "dropped": False,
}  # fmt: skip
DROP: dict[str, Any] = {
    "key": "fixer@2",
    "dry_run": False,
    "worktree": {"path": "/l/fixer/2", "done": "removed", "why": "archived first"},
    "branch": {"name": "flowdrop/fixer/2", "done": "kept", "why": "3 commit(s)"},
    "archive": {"folder": "/a", "bundle": "/a/b", "patch": None, "commits": 3, "files": []},
}


def test_the_lane_table_cells() -> None:
    """Guards each column's words: ahead/behind, the tree, the landing, progress."""
    line = lanes_text([ROW], None).splitlines()[1]
    for word in ("fixer@2", "completed", "+3/-1", "dirty", "squash → main", '{"tests":12}'):
        assert word in line
    gone = lanes_text([{**ROW, "exists": False, "dirty": None, "dropped": True}], None)
    assert "dropped" in gone.splitlines()[1]


def test_a_drop_said() -> None:
    """Guards ``lanes drop``'s words: the archive, the worktree and the branch, each why."""
    said = drop_text(DROP)
    assert "archived: 3 commit(s), 0 changed file(s) in /a" in said
    assert "worktree /l/fixer/2: removed (archived first)" in said
    assert "branch flowdrop/fixer/2: kept" in said
    assert "would be removed" in drop_text({**DROP, "dry_run": True})


def test_prune_says_the_lanes_it_dropped() -> None:
    """Guards prune's text naming each lane whose worktree it dropped."""
    report = {
        "dry_run": False, "delete": [], "kept": [], "runs": 0, "orphans": [], "bytes": 0,
        "keep": 20, "older_than": None, "lanes": [{**DROP, "archive": None}],
    }  # fmt: skip
    assert "dropped lane fixer@2's worktree /l/fixer/2" in prune_text(report)
