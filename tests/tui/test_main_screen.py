"""The main screen against real workspaces: what it lists, and that nothing crashes it."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

import orjson
import pytest
from textual.widgets import Static

from flowdrop_tui.core.paths import Layout
from flowdrop_tui.tui.widgets.flow_table import FlowTable
from flowdrop_tui.tui.widgets.no_flows import NoFlows
from tests.flow_bodies import counts_rounds
from tests.seeded_records import reindex, seed_run
from tests.tui.tui_helpers import RecordingApp, settled, until

SIZE = (120, 36)

RESUMABLE = counts_rounds(description="counts")

PLAIN = """
    from flowdrop_tui import flow

    @flow(description="never picked up")
    def main(run):
        return "done"
"""


def cell(table: FlowTable, name: str, column: str) -> str:
    return str(table.get_cell(name, column))


async def test_opens_with_the_first_flow_focused_and_every_flow_listed(
    workspace: Path, flow_writer: Callable[[str, str], Path]
) -> None:
    """Guards the first view: every flow, its round counter and resumability, focus on row 1."""
    flow_writer("alpha", RESUMABLE)
    flow_writer("beta", PLAIN)
    app = RecordingApp(Layout(workspace))
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: settled(app), what="the first reads")
        table = app.main_screen.flows
        assert app.focused is table
        assert table.selected_name == "alpha"
        assert cell(table, "alpha", "round") == "no rounds yet"
        assert cell(table, "alpha", "resumable") == "yes"
        assert cell(table, "beta", "resumable") == "no"
        assert cell(table, "beta", "status") == "never run"
        assert app.main_screen.query_one("#runs-pane").border_title == "Runs of alpha"


async def test_round_counter_and_last_run_come_from_the_records(
    workspace: Path, flow_writer: Callable[[str, str], Path]
) -> None:
    """Guards the round counter: the thread's last round, from the index."""
    flow_writer("alpha", RESUMABLE)
    seed_run(workspace, "20260817T010000.000Z-aaaaaa", "alpha", last_round=7, state={"n": 7})
    reindex(workspace)
    app = RecordingApp(Layout(workspace))
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: settled(app), what="the first reads")
        table = app.main_screen.flows
        assert cell(table, "alpha", "round") == "round 7"
        assert cell(table, "alpha", "status") == "cancelled"
        assert cell(table, "alpha", "last_run") == "20260817T010000.000Z-aaaaaa"
        runs = app.main_screen.runs
        assert list(runs.runs) == ["20260817T010000.000Z-aaaaaa"]
        assert str(runs.get_cell("20260817T010000.000Z-aaaaaa", "rounds")) == "1–7"


async def test_a_broken_flow_is_listed_with_its_error_and_refused_in_plain_words(
    workspace: Path, flow_writer: Callable[[str, str], Path]
) -> None:
    """Guards against a flow that does not load hiding the others or crashing the UI."""
    flow_writer("alpha", RESUMABLE)
    flow_writer("broken", "from flowdrop_tui import flow\n\ndef main(run)\n    pass\n")
    app = RecordingApp(Layout(workspace))
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: settled(app), what="the first reads")
        table = app.main_screen.flows
        assert cell(table, "broken", "resumable") == "SyntaxError, line 3"
        assert "flows/broken/flow.py:3" in cell(table, "broken", "about")
        assert cell(table, "alpha", "resumable") == "yes"
        await pilot.press("down")
        note = app.main_screen.query_one("#flow-note", Static)
        await until(pilot, lambda: note.display, what="the load error under the runs title")
        await pilot.press("enter")
        await until(pilot, lambda: app.heard("broken cannot be loaded"), what="the refusal")
        assert app.is_running


async def test_a_workspace_without_flows_shows_how_to_write_one_then_lists_it(
    tmp_path: Path,
) -> None:
    """Guards the empty workspace: a how-to instead of an empty table, and live discovery."""
    ws = tmp_path / "ws"
    ws.mkdir()
    app = RecordingApp(Layout(ws))
    async with app.run_test(size=SIZE) as pilot:
        help_text = app.main_screen.query_one(NoFlows)
        bar = app.main_screen.query_one("#workspace-bar", Static)
        await until(pilot, lambda: "not a git repository" in str(bar.render()), what="no git")
        main = app.main_screen
        panes = [main.flows, main.query_one("#runs-pane"), main.query_one("#run-pane")]
        assert main.has_class("-no-flows") and help_text.display
        assert "flows/<name>/" in str(help_text.render())
        assert not any(pane.display for pane in panes)  # the how-to gets their room
        assert main.selected_flow_name() is None
        folder = ws / "flows" / "first"
        folder.mkdir(parents=True)
        (folder / "flow.py").write_text(PLAIN.replace("\n    ", "\n"))
        await until(pilot, lambda: "first" in main.flows.rows_by_name, what="the flow")
        assert not main.has_class("-no-flows")
        await until(pilot, lambda: all(pane.display for pane in panes), what="the panes back")
        assert not help_text.display
        assert main.selected_flow_name() == "first"


async def test_an_unreadable_record_is_shown_where_it_belongs(
    workspace: Path, flow_writer: Callable[[str, str], Path]
) -> None:
    """Guards against a corrupt state.json or junk in cycle.jsonl crashing the UI."""
    flow_writer("alpha", RESUMABLE)
    run_id = seed_run(workspace, "20260817T010000.000Z-bbbbbb", "alpha", state={"n": 3})
    folder = workspace / ".flowdrop" / "runs" / run_id
    (folder / "state.json").write_text("{not json")
    with (folder / "cycle.jsonl").open("ab") as handle:
        handle.write(b'\x00\xff garbage\n{"t": 1}\n{torn')
    reindex(workspace)
    app = RecordingApp(Layout(workspace))
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: settled(app), what="the first reads")
        detail = app.main_screen.detail
        assert detail.extra is not None
        assert detail.extra["state"]["error"] is not None
        text = str(detail.query_one("#detail-text", Static).render())
        assert "unreadable" in text and "state.json" in text
        assert app.main_screen.feed.shown == 9  # the whole lines; junk and torn ones skipped


async def test_git_facts_are_shown_for_a_repository(
    workspace: Path, flow_writer: Callable[[str, str], Path]
) -> None:
    """Guards the workspace line: branch of the repository the UI opened in."""
    flow_writer("alpha", RESUMABLE)
    subprocess.run(["git", "add", "-A"], cwd=workspace, check=True)
    app = RecordingApp(Layout(workspace))
    async with app.run_test(size=SIZE) as pilot:
        bar = app.main_screen.query_one("#workspace-bar", Static)
        await until(pilot, lambda: "git main" in str(bar.render()), what="the branch")


def test_state_changes_since_the_source_are_plain_data(workspace: Path) -> None:
    """Guards what the detail pane is built from: added, changed and removed keys."""
    from flowdrop_tui.core import views
    from flowdrop_tui.core.records.run_record.run_fold import load_run

    seed_run(workspace, "20260817T010000.000Z-cccccc", "alpha", state={"a": 1, "b": 2})
    seed_run(
        workspace,
        "20260817T020000.000Z-dddddd",
        "alpha",
        source="20260817T010000.000Z-cccccc",
        first_round=4,
        last_round=5,
        state={"a": 1, "b": 3, "c": [1]},
        minute=60,
    )
    layout = Layout(workspace)
    view = views.state_view(layout, load_run(layout, "20260817T020000.000Z-dddddd"))
    assert view["changes"] == {"added": {"c": [1]}, "changed": {"b": [2, 3]}, "removed": {}}
    assert orjson.loads(orjson.dumps(view["state"])) == {"alpha": {"a": 1, "b": 3, "c": [1]}}


async def test_a_failed_read_is_said_and_the_screen_carries_on(
    workspace: Path, flow_writer: Callable[[str, str], Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Guards the one error path for the screen's workers (its Worker.StateChanged
    handler): a read that raises is a notification naming it, never a crash."""
    from flowdrop_tui.tui.screens import workspace_reads

    def broken(_: Layout, **__: object) -> None:
        raise RuntimeError("the ledger is on fire")

    monkeypatch.setattr(workspace_reads, "isolated_usage", broken)
    flow_writer("alpha", RESUMABLE)
    app = RecordingApp(Layout(workspace))
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.heard("RuntimeError: the ledger is on fire"))
        await until(pilot, lambda: settled(app), what="the other reads")
        assert app.main_screen.flows.selected_name == "alpha"
