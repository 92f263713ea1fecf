"""Prune from the UI: offered in the command palette, asked in a modal showing the dry
run, done only on yes; the header shows the workspace's runs and disk used."""

from __future__ import annotations

from pathlib import Path

from textual.widgets import Static

from flowdrop_tui.core.paths import Layout
from flowdrop_tui.core.records.listing import pins
from flowdrop_tui.tui.screens.prune_modal import PruneModal
from flowdrop_tui.tui.widgets.workspace_bar import WorkspaceBar
from tests.seeded_records import reindex, seed_run
from tests.tui.tui_helpers import RecordingApp, asked, settled, until

SIZE = (120, 36)
FLOW = """from flowdrop_tui import flow

@flow(resumable=True)
def main(run):
    pass
"""


def seeded(ws: Path, runs: int) -> list[str]:
    (ws / "flows" / "alpha").mkdir()
    (ws / "flows" / "alpha" / "flow.py").write_text(FLOW)
    ids = [f"20260817T{h:02d}0000.000Z-aaaa{h:02d}" for h in range(1, runs + 1)]
    for n, run_id in enumerate(ids):
        seed_run(ws, run_id, "alpha", minute=n, state={"n": n})
    reindex(ws)
    return ids


def on_disk(ws: Path) -> list[str]:
    return sorted(p.name for p in (ws / ".flowdrop" / "runs").iterdir())


async def test_prune_from_the_palette_shows_the_dry_run_and_deletes_on_yes(
    workspace: Path,
) -> None:
    """Guards the UI's prune: a palette command; a modal with the dry run's words; nothing
    goes on cancel; on yes the runs beyond the newest 20 go and the UI says so."""
    ids = seeded(workspace, 23)
    app = RecordingApp(Layout(workspace))
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: settled(app), what="the first reads")
        bar = app.query_one(WorkspaceBar)
        await until(pilot, lambda: "23 runs" in bar.usage_text, what="the workspace's size")
        command = next(
            c for c in app.get_system_commands(app.screen) if c.title == "Prune old runs"
        )
        command.callback()
        await until(pilot, lambda: asked(app, PruneModal), what="the dry run")
        shown = str(app.screen.query_one("#prune-plan Static", Static).render())
        assert "would delete 3 of 23 runs" in shown
        await pilot.press("n")
        await until(pilot, lambda: not isinstance(app.screen, PruneModal), what="cancel")
        assert on_disk(workspace) == ids
        command.callback()
        await until(pilot, lambda: asked(app, PruneModal), what="the dry run")
        await pilot.press("y")
        await until(pilot, lambda: app.heard("pruned 3 runs"), what="the prune")
        assert on_disk(workspace) == ids[3:]
        await until(pilot, lambda: "20 runs" in bar.usage_text, what="the size again")
        await pilot.pause(0.5)  # the watch reports the vanished runs: nothing may fail
        assert len(app.said) == 1, app.said
        assert app.said[0].startswith("pruned 3 runs and 0 orphaned transcripts ("), app.said


async def test_the_run_list_shows_which_runs_are_pinned(workspace: Path) -> None:
    """Guards 'pinned shown in the UI run list'."""
    ids = seeded(workspace, 2)
    pins.pin(Layout(workspace), ids[0])
    app = RecordingApp(Layout(workspace))
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: settled(app), what="the first reads")
        table = app.main_screen.runs
        await until(pilot, lambda: table.row_count == 2, what="the runs")
        assert table.get_cell(ids[0], "status").plain == "cancelled, pinned"
        assert table.get_cell(ids[1], "status").plain == "cancelled"


async def test_nothing_to_prune_offers_only_close(workspace: Path) -> None:
    """Guards the modal when nothing would go: no delete button, yes does nothing."""
    ids = seeded(workspace, 2)
    app = RecordingApp(Layout(workspace))
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: settled(app), what="the first reads")
        app.action_prune()
        await until(pilot, lambda: asked(app, PruneModal), what="the dry run")
        assert not app.screen.query("#confirm")
        await pilot.press("y")
        await until(pilot, lambda: not isinstance(app.screen, PruneModal), what="closed")
        assert on_disk(workspace) == ids
