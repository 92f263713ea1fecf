"""Screens as pictures, at a fixed size, from records with fixed ids and times.

Regenerate with ``pytest tests/tui/test_snapshots.py --snapshot-update`` in the
commit that changes a screen (or moves the pinned Textual), after looking at them.
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot

from flowdrop_tui.core.paths import Layout
from flowdrop_tui.tui.screens.help_screen import HelpScreen
from flowdrop_tui.tui.screens.pick_up_modal import PickUpModal
from tests.seeded_records import reindex, seed_run
from tests.tui.tui_helpers import RecordingApp, asked, settled, until

SIZE = (120, 36)
FIRST = "20260817T010000.000Z-a1b2c3"
SECOND = "20260817T020000.000Z-d4e5f6"

Compare = Callable[..., bool]


@pytest.fixture
def seeded(workspace: Path) -> Path:
    """Three flows — resumable, plain, broken — and a picked-up thread of two runs."""

    def write(name: str, body: str) -> None:
        folder = workspace / "flows" / name
        folder.mkdir()
        (folder / "flow.py").write_text(textwrap.dedent(body).lstrip())

    write(
        "digest",
        """
        from flowdrop_tui import flow

        @flow(resumable=True, description="Summarise the day's commits")
        def main(run):
            for round in run.rounds():
                run.state["reviewed"] = round
        """,
    )
    write(
        "lint",
        """
        from flowdrop_tui import flow

        @flow(description="Check the tree (never picked up)")
        def main(run):
            return "clean"
        """,
    )
    write("typo", "from flowdrop_tui import flow\n\n@flow(resumable=True)\ndef main(run)\n")
    seed_run(workspace, FIRST, "digest", last_round=3, state={"reviewed": 3, "since": FIRST})
    seed_run(
        workspace,
        SECOND,
        "digest",
        source=FIRST,
        first_round=4,
        last_round=6,
        outcome="cancelled",
        state={"reviewed": 6, "since": FIRST, "notes": ["flaky test"]},
        minute=60,
    )
    reindex(workspace)
    return workspace


def app_for(workspace: Path) -> RecordingApp:
    return RecordingApp(Layout(workspace))


async def ready(pilot: Pilot[Any]) -> None:
    app = pilot.app
    assert isinstance(app, RecordingApp)
    await until(pilot, lambda: settled(app), what="the first reads")


def test_main_screen(seeded: Path, snap_compare: Compare) -> None:
    """The flows, the first flow's runs, and its newest run with what changed."""
    assert snap_compare(app_for(seeded), terminal_size=SIZE, run_before=ready)


def test_broken_flow(seeded: Path, snap_compare: Compare) -> None:
    """A flow that does not load: listed with its error, which shows over its runs."""

    async def on_broken(pilot: Pilot[Any]) -> None:
        await ready(pilot)
        await pilot.press("down", "down")
        app = pilot.app
        assert isinstance(app, RecordingApp)
        await until(pilot, lambda: app.main_screen.selected_flow == "typo", what="selected")
        await until(pilot, lambda: settled(app), what="its runs")

    assert snap_compare(app_for(seeded), terminal_size=SIZE, run_before=on_broken)


def test_help_screen(seeded: Path, snap_compare: Compare) -> None:
    """Every key, from the bindings."""

    async def on_help(pilot: Pilot[Any]) -> None:
        await ready(pilot)
        await pilot.press("question_mark")
        await until(pilot, lambda: isinstance(pilot.app.screen, HelpScreen), what="the help")

    assert snap_compare(app_for(seeded), terminal_size=SIZE, run_before=on_help)


def test_pick_up_preview(seeded: Path, snap_compare: Compare) -> None:
    """What enter will carry forward: from which run, which round, which keys."""

    async def on_preview(pilot: Pilot[Any]) -> None:
        await ready(pilot)
        await pilot.press("enter")
        await until(pilot, lambda: asked(pilot.app, PickUpModal), what="preview")

    assert snap_compare(app_for(seeded), terminal_size=SIZE, run_before=on_preview)


SMALL = (80, 24)


def test_main_screen_at_80x24(seeded: Path, snap_compare: Compare) -> None:
    """80×24 is first-class: every flow shows, the tables drop what the Run pane repeats,
    the footer fits, and no run id wraps."""
    assert snap_compare(app_for(seeded), terminal_size=SMALL, run_before=ready)


def test_runs_filter_at_80x24(seeded: Path, snap_compare: Compare) -> None:
    """``/`` on the runs table: the prompt says what it filters; the flows stay whole."""

    async def on_filter(pilot: Pilot[Any]) -> None:
        await ready(pilot)
        app = pilot.app
        assert isinstance(app, RecordingApp)
        app.main_screen.runs.focus()
        await pilot.press("slash", "a", "1", "b")
        await until(pilot, lambda: app.main_screen.runs.row_count == 1, what="filtered")
        await until(pilot, lambda: settled(app), what="the run shown")
        # the bar laid out at its full width (on a loaded machine one frame showed it
        # shrunk to its text, "▊a1b▎"), then a frame drawn with it
        bar = app.main_screen.query_one("#filter")
        await until(pilot, lambda: bar.region.width > SMALL[0] // 2, what="the bar's width")
        await pilot.pause()

    assert snap_compare(app_for(seeded), terminal_size=SMALL, run_before=on_filter)


def test_pick_up_preview_with_toasts_at_80x24(seeded: Path, snap_compare: Compare) -> None:
    """A dialog at 80×24 with notifications arriving: they sit at the top, two at most,
    never over its buttons."""

    async def on_preview(pilot: Pilot[Any]) -> None:
        await ready(pilot)
        await pilot.press("enter")
        await until(pilot, lambda: asked(pilot.app, PickUpModal), what="preview")
        for n in range(4):
            pilot.app.notify(f"run {n} of digest completed", timeout=60)
        await pilot.pause(0.3)

    assert snap_compare(app_for(seeded), terminal_size=SMALL, run_before=on_preview)


def test_help_screen_at_80x24(seeded: Path, snap_compare: Compare) -> None:
    """Help at 80×24: a description that wraps stays in its column."""

    async def on_help(pilot: Pilot[Any]) -> None:
        await ready(pilot)
        await pilot.press("question_mark")
        await until(pilot, lambda: isinstance(pilot.app.screen, HelpScreen), what="the help")

    assert snap_compare(app_for(seeded), terminal_size=SMALL, run_before=on_help)
