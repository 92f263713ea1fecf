"""Issue 26 item 5: at 80×24 the events were cut to ~22 characters (round numbers
lost) and notifications covered a dialog's title."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from textual.widgets import Button

from flowdrop_tui.core.paths import Layout
from flowdrop_tui.core.records.run_record.run_fold import list_run_ids
from flowdrop_tui.tui.screens.pick_up_modal import PickUpModal
from flowdrop_tui.tui.widgets.event_feed import feed_lines
from tests.conftest import CLI
from tests.flow_bodies import THREE_ROUNDS_A_RUN
from tests.tui.tui_helpers import RecordingApp, asked, settled, until

SMALL = (80, 24)

LONG_LOG = {
    "t": "2026-08-17T01:44:55.212Z",
    "event": "log",
    "message": "a round of the capped flow that says quite a lot of words",
    "fields": {"round": 12},
}
ROUND_ENDED = {
    "t": "2026-08-17T01:44:57.000Z",
    "event": "round_ended",
    "key": "three",
    "round": 41,
    "outcome": "ok",
    "seconds": 0.25,
    "moved": {"changed": ["state"]},
}


def test_a_narrow_line_wraps_compactly_and_keeps_every_word() -> None:
    lines = feed_lines(ROUND_ENDED, 36)
    assert lines[0] == "01:44:57 round_ended three round 41"
    assert all(len(line) <= 36 for line in lines)
    assert all(line.startswith("  ") for line in lines[1:])
    assert " ".join(" ".join(lines).split()).endswith("round 41 · ok · 0.2s · changed state")
    started = {**ROUND_ENDED, "event": "round_started", "key": "digest", "round": 6}
    assert feed_lines(started, 36) == ["01:44:57 round_started digest", "  round 6"]  # together
    words = " ".join(" ".join(feed_lines(LONG_LOG, 36)).split())
    assert words == f"01:44:55 log {LONG_LOG['message']} · round=12"


def test_a_wide_line_is_the_full_one_wrapped_under_its_words() -> None:
    lines = feed_lines(LONG_LOG, 70)
    assert lines[0].startswith("01:44:55.212  log             a round of the capped")
    assert all(len(line) <= 70 for line in lines)
    assert all(line.startswith(" " * 30) for line in lines[1:])
    assert feed_lines(LONG_LOG, 0) == [lines[0] + "".join(" " + s.strip() for s in lines[1:])]


async def test_at_80x24_the_events_show_every_word_and_round_numbers(
    layout: Layout, flow_writer: Callable[[str, str], Path], cli: CLI
) -> None:
    """The real feed at 80×24: no line wider than the pane, every round's number in it."""
    flow_writer("three", THREE_ROUNDS_A_RUN)
    cli("run", "three", check=0)
    app = RecordingApp(layout)
    async with app.run_test(size=SMALL) as pilot:
        main = app.main_screen
        await until(pilot, lambda: main.selected_run is not None and settled(app))
        feed = main.feed
        await until(pilot, lambda: feed.shown > 5, what="the run's events")
        width = feed.content_region.width
        assert 30 <= width < 60 and feed.wrapped_to <= width
        assert all(len(line) <= feed.wrapped_to for line in feed.lines)
        text = " ".join(" ".join(feed.lines).split())
        for number in (1, 2, 3):
            assert f"round_started three round {number}" in text
            assert f"round_ended three round {number} · ok" in text
        await pilot.resize_terminal(160, 45)  # wider: wrapped again, in the full form
        await until(pilot, lambda: feed.wrapped_to >= 60, what="wrapped again")
        assert any("round_started   three round 3" in line for line in feed.lines)


async def test_at_80x24_toasts_never_cover_a_dialogs_title_nor_its_buttons(
    layout: Layout, flow_writer: Callable[[str, str], Path], cli: CLI
) -> None:
    flow_writer("three", THREE_ROUNDS_A_RUN)
    cli("run", "three", check=0)
    app = RecordingApp(layout)
    async with app.run_test(size=SMALL, notifications=True) as pilot:
        main = app.main_screen
        await until(pilot, lambda: main.selected_run is not None and settled(app))
        main.flows.focus()
        await pilot.press("enter")
        modal = await until(pilot, lambda: asked(app, PickUpModal), what="the preview")
        for n in range(4):
            app.notify(f"run {n} of three completed after round {n}: a result with words")
        await until(pilot, lambda: len(modal.query("Toast")) == 2, what="two toasts")
        await pilot.pause()
        body = modal.query_one("#pick-up-plan")
        title_row = body.region.y  # the title is the body's first line
        covered = [toast.region for toast in modal.query("Toast")]
        assert covered and all(not r.contains(r.x, title_row) for r in covered)
        assert all(r.y > title_row for r in covered)
        for button in modal.query(Button):
            assert all(not r.overlaps(button.region) for r in covered), button.id
        assert list_run_ids(layout) == [list_run_ids(layout)[0]]
