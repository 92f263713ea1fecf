"""Issue 35 item 4: the flow list and the top line follow the runs as they move — a
flow's USAGE as its run's sessions close, and a flow called by another (``run.call``)
is part of its caller's run, not a second paused flow on the top line."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from flowdrop_tui.core.paths import Layout
from flowdrop_tui.tui.widgets.workspace_bar import WorkspaceBar
from tests.conftest import CLI
from tests.seeded_records import reindex, seed_run
from tests.tui.test_usage_columns import FLOW, SPENT, add_session
from tests.tui.tui_helpers import RecordingApp, settled, until

SIZE = (160, 40)
RUN = "20260817T010000.000Z-aaaaaa"
CALLER = """
    from flowdrop_tui import flow

    @flow(resumable=True, budget={"rounds": 1})
    def main(run):
        for n in run.rounds():
            run.call("helper", target=f"pass {n}")
"""
HELPER = """
    from flowdrop_tui import flow

    @flow(resumable=True)
    def main(run, target=None):
        for n in run.rounds(range(1)):
            run.state["seen"] = target
        return target
"""


async def test_a_flows_usage_follows_its_run_as_sessions_close(
    workspace: Path, flow_writer: Callable[[str, str], Path]
) -> None:
    """USAGE was read with the flow list only (the index changing): a session of the
    selected flow's run that closed after the list was read left it at "—"."""
    flow_writer("metered", FLOW)
    seed_run(workspace, RUN, "metered", last_round=1, outcome=None, state={"n": 1})
    reindex(workspace)
    app = RecordingApp(Layout(workspace))
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: settled(app), what="the first reads")
        main = app.main_screen
        assert main.selected_run == RUN
        assert main.flows.rows_by_name["metered"].get("usage") is None
        add_session(workspace, RUN, "metered", SPENT)  # a session closes, spending
        table = main.flows
        await until(pilot, lambda: "usage" in table.columns, what="the USAGE column")
        await until(pilot, lambda: str(table.get_cell("metered", "usage")) == "6.3k/41")


async def test_the_top_line_counts_a_called_flow_with_its_caller(
    workspace: Path, cli: CLI, flow_writer: Callable[[str, str], Path]
) -> None:
    """A caller paused by its budget after calling ``helper``: the top line said
    "2 paused: caller, helper" (helper's last run is the caller's); it says one."""
    flow_writer("caller", CALLER)
    flow_writer("helper", HELPER)
    cli("run", "caller", check=0)
    assert [row["status"] for row in cli.json("flows")] == ["paused", "paused"]
    app = RecordingApp(Layout(workspace))
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: settled(app), what="the first reads")
        bar = app.main_screen.query_one(WorkspaceBar)
        await until(pilot, lambda: bar.summary == "1 paused: caller", what=bar.summary)
