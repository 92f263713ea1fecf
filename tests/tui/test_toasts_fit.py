"""Issue 35 item 4: at 80×24 two notifications never overlap each other (a blank row
between them, so two read as two) nor the footer — over the main screen, the inbox,
and a dialog (whose screen beneath still shows its footer on the last row)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from rich.text import Text
from textual.geometry import Region
from textual.widgets._toast import Toast

from flowdrop_tui.core.paths import Layout
from flowdrop_tui.tui.screens.confirm_modal import ConfirmModal, ask
from flowdrop_tui.tui.screens.inbox_screen import InboxScreen
from tests.tui.tui_helpers import RecordingApp, asked, settled, until

WIDTH, HEIGHT = 80, 24
FLOW = """
    from flowdrop_tui import flow

    @flow
    def main(run):
        pass
"""
LONG = (
    "run 20261206T072552.024Z-40137d of counter paused after round 6: same failure 5 "
    "rounds in a row: " + "error: the build failed at line 42 of a file; " * 12
)
SHORT = "counter has no live run to pause"


def toasts(app: RecordingApp) -> list[Region]:
    return sorted((t.region for t in app.screen.query(Toast) if t.region), key=lambda r: r.y)


async def two_fit(pilot: object, app: RecordingApp, where: str) -> None:
    app.notify(LONG, severity="warning", timeout=60, markup=False)
    app.notify(SHORT, title="Refused", severity="error", timeout=60, markup=False)
    shown = await until(pilot, lambda: len(toasts(app)) == 2 and toasts(app), what=where)  # type: ignore[arg-type]
    upper, lower = shown
    assert upper.bottom < lower.y, (where, shown)  # a row between them at least
    assert lower.bottom <= HEIGHT - 1, (where, shown)  # the last row is the footer's
    assert upper.y >= 1, (where, shown)  # the top line stays
    app.clear_notifications()
    await until(pilot, lambda: not toasts(app), what="cleared")  # type: ignore[arg-type]


async def test_two_notifications_fit_apart_above_the_footer_at_80x24(
    workspace: Path, flow_writer: Callable[[str, str], Path]
) -> None:
    """Proves, through ``two_fit``'s asserts, that two notifications fit apart above the
    footer at 80×24 on the main screen, over a dialog and on the inbox."""
    flow_writer("counter", FLOW)
    app = RecordingApp(Layout(workspace))
    async with app.run_test(size=(WIDTH, HEIGHT), notifications=True) as pilot:
        await until(pilot, lambda: settled(app), what="the first reads")
        await two_fit(pilot, app, "the main screen")
        question = ConfirmModal("Close it?", Text("a question"), id="toasts-question")
        ask(app, question, lambda _: None)
        await until(pilot, lambda: asked(app, ConfirmModal), what="the dialog")
        await two_fit(pilot, app, "a dialog")
        await pilot.press("escape")
        await until(pilot, lambda: not asked(app, ConfirmModal), what="closed")
        await pilot.press("i")
        await until(pilot, lambda: isinstance(app.screen, InboxScreen), what="the inbox")
        await two_fit(pilot, app, "the inbox")
