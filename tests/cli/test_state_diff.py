"""Issue 35 item 4: ``diff RUN --state [--against OTHER]`` — what a run's state changed
against the run it was picked up from (or another), in words and ``--json`` — real
processes; until now only the UI's run pane said it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from tests.conftest import CLI

KEEPS = """
    from flowdrop_tui import flow

    @flow(resumable=True)
    def main(run):
        for n in run.rounds(range(1)):
            run.state["count"] = run.state.get("count", 0) + 1
            run.state["kept"] = "same"
            if run.state["count"] == 1:
                run.state["first_only"] = [1, 2]
            else:
                run.state.pop("first_only", None)
                run.state["later"] = {"a": 1}
"""


def test_diff_state_against_the_source_and_another_run(
    workspace: Path, cli: CLI, flow_writer: Callable[[str, str], Path]
) -> None:
    flow_writer("keeps", KEEPS)
    cli("run", "keeps", check=0)
    cli("run", "keeps", check=0)  # picks up: count 1 → 2
    cli("run", "keeps", check=0)  # count 2 → 3
    third, second, first = (str(row["run"]) for row in cli.json("runs", "keeps"))
    found = cli.json("diff", second, "--state")
    assert (found["run"], found["against"], found["source"]) == (second, first, True)
    assert found["key"] == "keeps"
    assert found["added"] == {"later": {"a": 1}}
    assert found["removed"] == {"first_only": [1, 2]}
    assert found["changed"] == {"count": {"old": 1, "new": 2}}
    assert found["same"] == 1
    words = cli("diff", second, "--state", check=0).stdout
    assert f"against run {first} (picked up from it): 1 added, 1 changed, 1 removed" in words
    assert '  + later = {"a":1}' in words and "  ~ count: 1 → 2" in words
    assert "  - first_only (was [1,2])" in words
    found = cli.json("diff", third, "--state", "--against", first)
    assert (found["against"], found["source"]) == (first, False)
    assert found["changed"] == {"count": {"old": 1, "new": 3}}
    fresh = cli.json("diff", first, "--state", check=2)
    assert fresh["error"]["code"] == "NOT_FOUND" and "--against" in fresh["error"]["message"]
    assert cli.json("diff", first, "--against", second, check=2)["error"]["code"] == "USAGE"
