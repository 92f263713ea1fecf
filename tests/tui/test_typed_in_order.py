"""A burst of keys (tmux's send-keys, a fast typist under load) edits a dialog's line in
the order it was typed: backspace, enter and the other editing keys act when they come,
not after the letters typed behind them (Textual runs an Input's bindings once the key
has bubbled back up to the app, while a letter is inserted at once)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from textual import events

from flowdrop_tui.core.paths import Layout
from flowdrop_tui.tui.screens.raise_budget_modal import LiftBudgetModal, RaiseBudgetModal
from tests.conftest import CLI
from tests.tui.test_budget_raise import out_of_budget
from tests.tui.tui_helpers import RecordingApp, asked, settled, until


async def test_a_burst_with_backspace_edits_in_typing_order(
    layout: Layout, flow_writer: Callable[[str, str], Path], cli: CLI
) -> None:
    """``b``, then backspace n o n e enter in one burst submitted 'non' (the backspace
    ran last, taking the e): the dialog refused it instead of asking to lift."""
    run_id = out_of_budget(layout, cli, flow_writer)
    app = RecordingApp(layout)
    async with app.run_test(size=(80, 24)) as pilot:
        main = app.main_screen
        await until(pilot, lambda: main.selected_run == run_id, what="the run listed")
        await until(pilot, lambda: settled(app), what="the first reads")
        await pilot.press("b")
        await until(pilot, lambda: asked(app, RaiseBudgetModal), what="the dialog")
        burst = [("backspace", None), *((c, c) for c in "none"), ("enter", None)]
        for key, character in burst:  # all queued before any is handled, as a terminal's
            app.post_message(events.Key(key, character))
        await until(pilot, lambda: asked(app, LiftBudgetModal), what="the lift question")
