"""Live updates: the event feed follows, bursts coalesce, and the other keys of the screen."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import orjson
from textual import events
from textual.message import Message

from flowdrop_tui.core.paths import Layout
from flowdrop_tui.tui.messages import RunChanged, RunPolled
from flowdrop_tui.tui.screens.help_screen import HelpScreen
from tests.flow_bodies import counts_rounds
from tests.seeded_records import reindex, seed_run
from tests.tui.tui_helpers import RecordingApp, settled, until

SIZE = (120, 36)
FLOW = counts_rounds(description="counts")
RUN = "20260817T010000.000Z-eeeeee"


def append(ws: Path, run_id: str, count: int, start: int = 0) -> None:
    """Events appended as a run appends them: one write per line."""
    path = ws / ".flowdrop" / "runs" / run_id / "cycle.jsonl"
    with path.open("ab", buffering=0) as handle:
        for n in range(start, start + count):
            line = {
                "t": "2026-08-17T01:00:59.000Z",
                "event": "log",
                "key": "alpha",
                "message": f"tick {n}",
                "fields": {},
            }
            handle.write(orjson.dumps(line) + b"\n")


async def test_the_feed_follows_at_the_bottom_and_holds_still_when_scrolled_up(
    workspace: Path, flow_writer: Callable[[str, str], Path]
) -> None:
    """Guards follow mode: new events scroll in only while the view is at the bottom."""
    flow_writer("alpha", FLOW)
    seed_run(workspace, RUN, "alpha", outcome=None, last_round=40)
    reindex(workspace)
    app = RecordingApp(Layout(workspace))
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: settled(app), what="the first reads")
        feed = app.main_screen.feed
        assert feed.following and feed.border_subtitle == "following"
        feed.scroll_to(y=0, animate=False, immediate=True)
        await until(pilot, lambda: not feed.following, what="scrolled up")
        assert "not following" in str(feed.border_subtitle)
        append(workspace, RUN, 5)
        await until(pilot, lambda: feed.shown == 82 + 5, what="the new events")
        assert feed.scroll_y == 0  # held still
        feed.scroll_end(animate=False, immediate=True)
        await until(pilot, lambda: feed.following, what="back at the bottom")
        append(workspace, RUN, 5, start=5)
        await until(pilot, lambda: feed.shown == 82 + 10, what="more events")
        await until(pilot, lambda: feed.is_vertical_scroll_end, what="following again")
        assert feed.lines[-1].endswith("tick 9")
        await pilot.resize_terminal(100, 26)  # a smaller window must not stop following
        append(workspace, RUN, 5, start=10)
        await until(pilot, lambda: feed.shown == 82 + 15, what="events after the resize")
        await until(pilot, lambda: feed.is_vertical_scroll_end, what="still following")
        assert feed.following


async def test_a_burst_of_appends_coalesces_into_few_reads(
    workspace: Path, flow_writer: Callable[[str, str], Path]
) -> None:
    """Guards against one re-read (and repaint) per appended line: 2,000 lines arrive in
    a handful of reads, every one of them on screen, in order."""
    flow_writer("alpha", FLOW)
    seed_run(workspace, RUN, "alpha", outcome=None, last_round=1)
    reindex(workspace)
    seen: list[Message] = []
    app = RecordingApp(Layout(workspace))
    async with app.run_test(size=SIZE, message_hook=seen.append) as pilot:
        await until(pilot, lambda: settled(app), what="the first reads")
        feed = app.main_screen.feed
        before = feed.shown
        seen.clear()
        for burst in range(20):
            append(workspace, RUN, 100, start=burst * 100)
        await until(pilot, lambda: feed.shown == before + 2000, what="every line")
        polls = [m for m in seen if isinstance(m, RunPolled) and m.update.events]
        changes = [m for m in seen if isinstance(m, RunChanged)]
        assert len(polls) <= 10, len(polls)
        assert len(changes) <= 10, len(changes)
        ticks = [line for line in feed.lines if "tick" in line]
        assert [t.rsplit(" ", 1)[-1] for t in ticks] == [str(n) for n in range(2000)]


async def test_slash_filters_flows_and_escape_clears_it(
    workspace: Path, flow_writer: Callable[[str, str], Path]
) -> None:
    """Guards ``/``: typing narrows the flows at once; escape brings them all back."""
    for name in ("alpha", "beta", "gamma"):
        flow_writer(name, FLOW)
    app = RecordingApp(Layout(workspace))
    async with app.run_test(size=SIZE) as pilot:
        main = app.main_screen
        await until(pilot, lambda: settled(app), what="the first reads")
        assert main.flows.row_count == 3
        await pilot.press("slash", "b", "e")
        await until(pilot, lambda: main.flows.row_count == 1, what="the filter")
        assert main.flows.selected_name == "beta"
        assert main.selected_flow == "beta"
        await pilot.press("escape")
        await until(pilot, lambda: main.flows.row_count == 3, what="all back")
        assert app.focused is main.flows


async def test_question_mark_lists_every_key_from_the_bindings(
    workspace: Path, flow_writer: Callable[[str, str], Path]
) -> None:
    """Guards the help screen: it lists the keys the screen answers, and closes again."""
    flow_writer("alpha", FLOW)
    app = RecordingApp(Layout(workspace))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("question_mark")
        await until(pilot, lambda: isinstance(app.screen, HelpScreen), what="the help")
        keys = {description: key for key, description, _ in app.screen.keys}
        for description in (
            "Run",
            "Pick up",
            "Stop",
            "Pause",
            "Resume",
            "Fresh",
            "Filter",
            "Help",
            "Quit",
        ):
            assert description in keys
        assert keys["Stop"] == "esc" and keys["Pause"] == "p" and keys["Filter"] == "/"
        await pilot.press("escape")
        await until(pilot, lambda: not isinstance(app.screen, HelpScreen), what="closed")
        assert app.is_running  # escape closed the help; it stopped nothing


async def test_the_command_palette_offers_the_run_keys(
    workspace: Path, flow_writer: Callable[[str, str], Path]
) -> None:
    """Guards the palette: each run key is a command that runs the same action."""
    flow_writer("alpha", FLOW)
    app = RecordingApp(Layout(workspace))
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: settled(app), what="the first reads")
        titles = [command.title for command in app.get_system_commands(app.screen)]
        for title in ("Run (⏎)", "Stop (esc)", "Pause (p)", "Resume (r)", "Fresh (n)"):
            assert title in titles, titles
        stop = next(c for c in app.get_system_commands(app.screen) if c.title == "Stop (esc)")
        await stop.callback()
        await until(pilot, lambda: app.heard("alpha has no live run to stop"), what="the action")


async def test_one_end_goes_to_the_bottom_and_follows_again(
    workspace: Path, flow_writer: Callable[[str, str], Path]
) -> None:
    """Guards docs/decisions.md, "The terminal UI's keys" ("List keys"): "end to
    follow" took two presses of End (the first, an
    animated scroll, stopped short of a bottom that moved on)."""
    flow_writer("alpha", FLOW)
    seed_run(workspace, RUN, "alpha", outcome=None, last_round=40)
    reindex(workspace)
    app = RecordingApp(Layout(workspace))
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: settled(app), what="the first reads")
        feed = app.main_screen.feed
        feed.focus()
        await pilot.press("home")
        await until(pilot, lambda: not feed.following, what="scrolled up")
        assert "end to follow" in str(feed.border_subtitle)
        append(workspace, RUN, 50)
        await until(pilot, lambda: feed.shown == 82 + 50, what="the new events")
        # End while events stream in: more arrive before a scroll could have finished.
        app.post_message(events.Key("end", None))
        await pilot.pause(0.02)
        line = {"t": "2026-08-17T01:00:59.000Z", "event": "log", "message": "late", "fields": {}}
        for _ in range(5):
            feed.append([line] * 10)
            await pilot.pause(0.02)
        await pilot.wait_for_scheduled_animations()
        await pilot.pause(0.1)
        assert feed.following and feed.is_vertical_scroll_end
        assert feed.border_subtitle == "following"
        append(workspace, RUN, 5, start=50)
        await until(pilot, lambda: feed.shown == 82 + 105, what="more events")
        await until(pilot, lambda: feed.is_vertical_scroll_end, what="followed")
        await pilot.press("k")
        await until(pilot, lambda: not feed.following, what="k scrolls up")
        await pilot.press("G")
        assert feed.following and feed.is_vertical_scroll_end
