"""Quitting the UI the moment it opens (docs/decisions.md,
"The UI: hurried keys")."""

from __future__ import annotations

from pathlib import Path

from flowdrop_tui.core.paths import Layout
from flowdrop_tui.tui.app import FlowdropApp
from tests.conftest import write_flow
from tests.flow_bodies import DOES_NOTHING


async def test_q_pressed_before_the_first_frame_settles_quits_cleanly(workspace: Path) -> None:
    """Guards against a MountError traceback (exit 1) when `q` arrives within ~0.3 s of
    opening: the lower panes were still being mounted on a screen that had gone."""
    write_flow(workspace, "a", DOES_NOTHING)
    for _ in range(6):  # the window is a race with the first frame: try it a few times
        app = FlowdropApp(Layout(workspace))
        async with app.run_test() as pilot:
            await pilot.press("q")
        assert app.return_code == 0
        assert app._exception is None
