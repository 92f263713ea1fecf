"""``prune``'s keep rule on flows with fewer runs than ``--keep`` (SPEC §16: "the
newest N runs of each flow (default 20, and all of them when it has fewer)").

The real CLI over runs the real engine made. The property test over every flow size
against every ``keep`` is in ``test_prune_property.py``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.conftest import CLI, write_flow

COUNTS = """
    from flowdrop_tui import flow

    @flow(resumable=True)
    def main(run):
        run.state["n"] = run.state.get("n", 0) + 1
"""


def _runs(ws: Path) -> list[str]:
    return sorted(p.name for p in (ws / ".flowdrop" / "runs").iterdir() if p.name[0] != ".")


def _made(workspace: Path, count: int) -> tuple[CLI, list[str]]:
    write_flow(workspace, "counts", COUNTS)
    cli = CLI(workspace)
    for _ in range(count):
        cli("run", "counts", check=0)
    ids = _runs(workspace)
    assert len(ids) == count
    return cli, ids


def _newest(report: dict[str, Any]) -> set[str]:
    return {row["run"] for row in report["kept"] if "newest" in row["reasons"]}


def test_prune_with_its_defaults_keeps_all_fifteen_runs_of_a_flow(workspace: Path) -> None:
    """Guards 'all of them when it has fewer': 15 ended runs, default keep 20 (the old
    negative slice kept the newest 5 and deleted 10)."""
    cli, ids = _made(workspace, 15)
    report = cli.json("prune")
    assert report["delete"] == [] and _runs(workspace) == ids
    assert _newest(report) == set(ids)
    text = cli("prune", check=0).stdout
    assert text.startswith("deleted 0 of 15 runs"), text
    assert "kept 15 " in text, text


def test_prune_keep_5_of_a_flow_of_4_keeps_4(workspace: Path) -> None:
    cli, ids = _made(workspace, 4)
    dry = cli.json("prune", "--keep", "5", "--dry-run")
    assert dry["delete"] == [] and _newest(dry) == set(ids)
    report = cli.json("prune", "--keep", "5")
    assert report["delete"] == [] and _runs(workspace) == ids
    # and the slice is right on the other side of the flow's size too
    report = cli.json("prune", "--keep", "3")
    assert [row["run"] for row in report["delete"]] == ids[:1]
    assert _runs(workspace) == ids[1:]
