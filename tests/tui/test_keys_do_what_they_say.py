"""Escape, the filter and enter do what the key says, however fast they come
(docs/decisions.md, "The terminal UI's keys").

Each test here reproduces a misfire seen by hand on ea35e71 and fails there.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from textual import events
from textual.pilot import Pilot
from textual.widgets import Button

from flowdrop_tui.core.control import verbs
from flowdrop_tui.core.paths import Layout
from flowdrop_tui.core.records.run_record.run_fold import list_run_ids, load_run
from flowdrop_tui.core.records.run_record.run_info import ENDED, Status
from flowdrop_tui.tui.screens.close_run_modal import CloseRunModal
from flowdrop_tui.tui.screens.help_screen import HelpScreen
from flowdrop_tui.tui.widgets.filter_bar import FilterBar
from tests.conftest import CLI, paused_mid_run, write_flow
from tests.flow_bodies import (
    ITEMS_HELD_BY_GATE,
    LOGS_A_TICK_EVERY_TENTH,
    ONE_LONG_ROUND,
    RETURNS_AT_ONCE,
)
from tests.tui.tui_helpers import RecordingApp, asked, settled, until

SIZE = (120, 36)


def status(layout: Layout, run_id: str) -> Status:
    return load_run(layout, run_id).status


def ended(layout: Layout, run_id: str) -> bool:
    return status(layout, run_id) in ENDED


def started_since(layout: Layout, before: set[str]) -> list[str]:
    return sorted(set(list_run_ids(layout)) - before)


CHARACTERS = {"slash": "/", "enter": "\r", "escape": "\x1b", "question_mark": "?"}


async def burst(pilot: Pilot[Any], *keys: str) -> None:
    """Keys as a terminal delivers a fast typist's (or tmux's) burst: all queued on the
    app before the first is handled — not one at a time with a wait between, as
    ``pilot.press`` does."""
    for key in keys:
        pilot.app.post_message(events.Key(key, CHARACTERS.get(key, key)))
    await pilot.pause()


async def pressed(pilot: Pilot[Any], *keys: str) -> None:
    """Keys one at a time, each handled before the next (``pilot.press``)."""
    await pilot.press(*keys)


def typed(text: str) -> list[str]:
    return ["slash" if c == "/" else c for c in text]


# -- escape ----------------------------------------------------------------------------------


ESCAPE_SEQUENCES = [
    ["escape"],
    ["escape", "escape"],
    ["escape"] * 5,
    [*typed("/held"), "escape", "escape", "escape"],
    [*typed("/held"), "enter", "escape", "escape", "escape"],
    ["question_mark", "escape", "escape", "escape"],
    ["x", "escape", "escape", "escape"],
    ["x", "n", "escape", "escape"],
    ["tab", "escape", "escape", "tab", "escape", "escape"],
    ["tab", *typed("/paused"), "enter", "escape", "escape", "escape"],
]


async def test_no_sequence_of_escapes_closes_a_paused_run(layout: Layout, cli: CLI) -> None:
    """Guards the repro of item 1: ``/items``, escape, escape closed a paused run
    ``cancelled`` for good. Escape now closes what is open and never a paused run;
    only ``x`` and a confirmation that names the run do."""
    run_id = paused_mid_run(layout.workspace, cli, "held", ITEMS_HELD_BY_GATE)
    app = RecordingApp(layout)
    async with app.run_test(size=SIZE) as pilot:
        main = app.main_screen
        await until(pilot, lambda: main.selected_run == run_id, what="the paused run")
        for n, keys in enumerate(ESCAPE_SEQUENCES):
            # Every sequence as a burst; every other one also a key at a time (the
            # slower way, ~3 s a sequence, shows the same thing).
            for deliver in (burst, pressed) if n % 2 == 0 else (burst,):
                await deliver(pilot, *keys)
                await pilot.pause(0.1)
                assert status(layout, run_id) == Status.PAUSED, keys
                if isinstance(app.screen, CloseRunModal):
                    await pilot.press("n")
                main._apply_filter("flows", "")
                main._apply_filter("runs", "")
                main.flows.focus()
                await pilot.pause()
        assert "1 paused: held" in str(main.query_one("#workspace-bar").render())
        for escapes in range(1, 8):
            await burst(pilot, *["escape"] * escapes)
        assert app.heard(f"run {run_id} of held is paused; escape leaves it so")
        assert not app.heard("closed cancelled")
        assert status(layout, run_id) == Status.PAUSED
        assert load_run(layout, run_id).stop_pending is False

        await pilot.press("x")
        modal = await until(pilot, lambda: asked(app, CloseRunModal), what="asked")
        said = str(modal.query_one("#close-run-what").render())
        assert run_id in said and "never be resumed" in said and "round" in said
        assert app.focused is modal.query_one("#cancel", Button)  # the safe answer first
        await pilot.press("enter")  # on "keep it paused"
        await until(pilot, lambda: app.screen is main, what="closed")
        assert status(layout, run_id) == Status.PAUSED
        await pilot.press("x", "y")
        await until(pilot, lambda: app.heard("it is now closed cancelled"), what="the close")
        assert status(layout, run_id) == Status.CANCELLED


async def test_escape_closes_what_is_open_before_it_stops_a_run(
    layout: Layout, flow_writer: Callable[[str, str], Path]
) -> None:
    """Guards "that keypress ends there": an escape that closes the filter, a kept filter
    or help stops nothing; the next one stops after the round, the one after stops now."""
    flow_writer("slow", ONE_LONG_ROUND)
    app = RecordingApp(layout)
    async with app.run_test(size=SIZE) as pilot:
        main = app.main_screen
        await until(pilot, lambda: main.flows.selected_name == "slow", what="the flow")
        await pilot.press("enter")
        run_id = await until(
            pilot,
            lambda: main.selected_run in main.tracker.live and main.selected_run,
            what="the run",
        )
        await until(pilot, lambda: status(layout, run_id) == Status.RUNNING, what="running")
        for keys in (
            [*typed("/sl"), "escape"],
            [*typed("/slow"), "enter", "escape"],
            ["question_mark", "escape"],
        ):
            await burst(pilot, *keys)
            await pilot.pause(0.2)
            assert app.screen is main and not main.query_one(FilterBar).display
            assert load_run(layout, run_id).stop_pending is False, keys
        assert main.flows.filter_text == "" and main.flows.row_count == 1
        await pilot.press("escape")
        await until(pilot, lambda: app.heard("— escape again to stop now"), what="the stop")
        assert status(layout, run_id) == Status.RUNNING
        await pilot.press("escape")
        await until(pilot, lambda: status(layout, run_id) in ENDED, what="stopped now")


# -- the filter ------------------------------------------------------------------------------


def seed_flows(ws: Path) -> None:
    for name in ("tally", "lint", "boom"):
        write_flow(ws, name, RETURNS_AT_ONCE)


async def test_the_filter_applies_to_the_focused_table_and_the_text_it_shows(
    layout: Layout, cli: CLI
) -> None:
    """Guards item 2's repros: ``/tally`` emptied tally's own runs; ``/cancelled`` hid
    every flow although their rows say it. Now the flows filter narrows the flows by
    their row text and the runs filter the runs, each saying what it filters."""
    seed_flows(layout.workspace)
    cli("run", "tally", check=0)
    cli("run", "tally", check=0)
    older = list_run_ids(layout)[0]
    app = RecordingApp(layout)
    async with app.run_test(size=SIZE) as pilot:
        main = app.main_screen
        await until(pilot, lambda: settled(app), what="the first reads")
        main.flows.move_cursor(row=main.flows.get_row_index("tally"))
        await until(pilot, lambda: main.runs.row_count == 2 and settled(app), what="its runs")

        await burst(pilot, *typed("/tally"))
        bar = main.query_one(FilterBar)
        assert bar.border_title == "filter flows"
        await burst(pilot, "enter")
        assert list(main.flows.rows) == ["tally"]
        assert main.runs.row_count == 2  # its runs are not filtered by its name
        assert "filter: tally" in str(main.query_one("#flows-pane").border_title)

        await burst(pilot, "escape")  # a kept filter is cleared first
        await burst(pilot, *typed("/completed"), "enter")
        assert set(main.flows.rows) == {"tally"}  # its row says "completed"
        await burst(pilot, "escape")
        assert main.flows.row_count == 3

        main.flows.move_cursor(row=main.flows.get_row_index("tally"))
        await until(pilot, lambda: main.runs.row_count == 2 and settled(app), what="its runs")
        main.runs.focus()
        await pilot.pause()
        await burst(pilot, "slash")
        assert bar.border_title == "filter runs of tally"
        await burst(pilot, *older[-6:], "enter")
        assert list(main.runs.rows) == [older]
        assert main.selected_run == older  # the selection follows what is shown
        assert app.focused is main.runs
        assert main.flows.row_count == 3  # the flows are not filtered by a run id
        await burst(pilot, "slash", "backspace", "x", "y", "z", "enter")
        assert main.runs.row_count == 0 and main.selected_run is None
        assert main.detail.info is None and "escape clears" in main.detail.empty_text
        await burst(pilot, "enter")  # on no run: nothing is picked up
        await pilot.pause(0.3)
        assert len(list_run_ids(layout)) == 2
        assert app.heard("no run selected")


async def test_running_a_flow_with_a_filter_kept_shows_the_new_run(
    layout: Layout, cli: CLI
) -> None:
    """Guards ``/boom⏎⏎``: the launch raised ``RowDoesNotExist`` and the run never showed."""
    seed_flows(layout.workspace)
    app = RecordingApp(layout)
    async with app.run_test(size=SIZE) as pilot:
        main = app.main_screen
        await until(pilot, lambda: settled(app), what="the first reads")
        await pilot.press(*typed("/boom"), "enter", "enter")  # one at a time, as in the issue
        await until(pilot, lambda: list_run_ids(layout), what="the launch")
        run_id = list_run_ids(layout)[0]
        assert load_run(layout, run_id).key == "boom"
        await until(pilot, lambda: main.selected_run == run_id, what="the new run selected")
        assert run_id in main.runs.rows
        assert not any("RowDoesNotExist" in text for text in app.said), app.said

        # With a runs filter that hides it, the new run is still shown (the filter goes).
        await until(pilot, lambda: status(layout, run_id) in ENDED, what="its end")
        main.runs.focus()
        await pilot.pause()
        await burst(pilot, *typed("/nothing-shows-this"), "enter")
        assert main.runs.row_count == 0
        main.flows.focus()
        await pilot.pause()
        await burst(pilot, "enter")
        await until(pilot, lambda: len(list_run_ids(layout)) == 2, what="the second launch")
        second = list_run_ids(layout)[1]
        await until(pilot, lambda: main.selected_run == second, what="shown")
        assert app.heard("hid the new run: cleared")


# -- enter while the screen updates ----------------------------------------------------------

NAMES = ("alpha", "bravo", "delta", "gulf")
LAUNCHES = 8  # each a real run (~4 s here); on ea35e71 the first already launched the ticker


async def test_enter_launches_the_flow_typed_in_the_filter_while_runs_stream(
    layout: Layout, cli: CLI
) -> None:
    """Guards item 3: ``/name⏎⏎`` typed fast while a live run streams events launched the
    previously selected (hidden) flow. Keys now act where focus is when they are
    handled; this types the burst many times and checks every launch."""
    for name in NAMES:
        write_flow(layout.workspace, name, RETURNS_AT_ONCE)
    write_flow(layout.workspace, "ticker", LOGS_A_TICK_EVERY_TENTH)
    ticker = str(cli.json("run", "ticker", "--detach")["run"])
    app = RecordingApp(layout)
    async with app.run_test(size=SIZE) as pilot:
        main = app.main_screen
        await until(pilot, lambda: settled(app) or main.selected_flow, what="the first reads")
        launched: list[str] = []
        for round_, name in zip(range(LAUNCHES), itertools.cycle(NAMES), strict=False):
            main._apply_filter("flows", "")
            main.flows.focus()
            main.flows.move_cursor(row=main.flows.get_row_index("ticker"))
            await until(pilot, lambda: main.selected_run == ticker, what="the ticker")
            await until(pilot, lambda: main.feed.shown > 3, what="events streaming")
            before = set(list_run_ids(layout))
            await burst(pilot, *typed(f"/{name}"), "enter", "enter")
            new = await until(pilot, partial(started_since, layout, before), what="a launch")
            assert [load_run(layout, run).key for run in new] == [name], (round_, name)
            launched.extend(new)
            await until(pilot, partial(ended, layout, new[0]), what="its end")
        assert len(launched) == LAUNCHES
        assert status(layout, ticker) == Status.RUNNING  # no letter reached it as a key
        assert not app.heard("pausing") and not app.heard("stopping")


async def test_keys_typed_before_a_dialog_opens_go_to_the_dialog(layout: Layout, cli: CLI) -> None:
    """Guards the same rule for dialogs: ``x`` then a fast ``n`` answers the question
    (keep it paused) instead of starting a fresh run behind it."""
    run_id = paused_mid_run(layout.workspace, cli, "held", ITEMS_HELD_BY_GATE)
    app = RecordingApp(layout)
    async with app.run_test(size=SIZE) as pilot:
        main = app.main_screen
        await until(pilot, lambda: main.selected_run == run_id, what="the paused run")
        for _ in range(5):
            await burst(pilot, "x", "n")
            await until(pilot, lambda: app.screen is main, what="answered")
        await pilot.pause(0.3)
        assert list_run_ids(layout) == [run_id]
        assert status(layout, run_id) == Status.PAUSED
        await burst(pilot, "question_mark", "escape", "escape")
        await pilot.pause(0.2)
        assert not isinstance(app.screen, HelpScreen)
        assert status(layout, run_id) == Status.PAUSED

        # A key right after moving onto the flow acts on its runs once they are read.
        write_flow(layout.workspace, "aaa", RETURNS_AT_ONCE)
        await until(pilot, lambda: "aaa" in main.flows.rows and settled(app), what="aaa")
        main.flows.move_cursor(row=0)
        await until(pilot, lambda: main.selected_flow == "aaa" and settled(app), what="on aaa")
        await burst(pilot, "j", "x")
        modal = await until(pilot, lambda: asked(app, CloseRunModal), what="asked")
        assert modal.info.run == run_id
        await burst(pilot, "escape")
        assert not app.heard("has no paused run")


# -- older runs ------------------------------------------------------------------------------


async def test_m_reads_the_next_page_of_older_runs_until_all_are_shown(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Guards item 7: only the newest page of runs was reachable. ``m`` asks the core for
    the page older than the oldest shown, and adds it below (pages of 5 here)."""
    from flowdrop_tui.tui.screens import main_selection, workspace_reads
    from tests.seeded_records import reindex, seed_run

    monkeypatch.setattr(workspace_reads, "RUNS_SHOWN", 5)
    monkeypatch.setattr(main_selection, "RUNS_SHOWN", 5)
    write_flow(workspace, "tally", RETURNS_AT_ONCE)
    ids = [
        seed_run(workspace, f"20260817T{h:02d}0000.000Z-aaaa{h:02d}", "tally", minute=h * 60)
        for h in range(1, 13)
    ]
    reindex(workspace)
    app = RecordingApp(Layout(workspace))
    async with app.run_test(size=SIZE) as pilot:
        main = app.main_screen
        await until(pilot, lambda: settled(app), what="the first reads")
        pane = main.query_one("#runs-pane")
        assert list(main.runs.rows) == ids[::-1][:5]
        assert pane.border_subtitle == "newest 5 of 12 · m: 5 more"
        await pilot.press("m")
        await until(pilot, lambda: main.runs.row_count == 10, what="the second page")
        assert list(main.runs.rows) == ids[::-1][:10]
        assert pane.border_subtitle == "newest 10 of 12 · m: 2 more"
        assert main.selected_run == ids[-1]  # the cursor stays where it was
        await pilot.press("m")
        await until(pilot, lambda: main.runs.row_count == 12, what="the last page")
        assert list(main.runs.rows) == ids[::-1]
        assert pane.border_subtitle == ""
        await pilot.press("m")
        await until(pilot, lambda: app.heard("all 12 runs of tally are shown"), what="the end")
        main.runs.focus()
        await pilot.press("G")
        await until(pilot, lambda: main.selected_run == ids[0], what="G: the oldest")
        await pilot.press("g")
        await until(pilot, lambda: main.selected_run == ids[-1], what="g: the newest")
        await pilot.press("j", "j", "k")
        await until(pilot, lambda: main.selected_run == ids[-2], what="j j k")


# -- the header ------------------------------------------------------------------------------


async def test_the_header_says_what_runs_and_keeps_git_live(
    layout: Layout, cli: CLI, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Guards item 7: on opening, the header says what is still running; a branch
    switched outside shows without reopening (it was read once, at start)."""
    import subprocess

    from flowdrop_tui.tui.screens import main_screen

    monkeypatch.setattr(main_screen, "GIT_EVERY", 0.3)
    write_flow(layout.workspace, "slow", ONE_LONG_ROUND)
    write_flow(layout.workspace, "lint", RETURNS_AT_ONCE)
    run_id = str(cli.json("run", "slow", "--detach")["run"])
    app = RecordingApp(layout)
    async with app.run_test(size=SIZE) as pilot:
        main = app.main_screen
        bar = main.query_one("#workspace-bar")
        await until(pilot, lambda: "1 running: slow" in str(bar.render()), what="the summary")
        await until(pilot, lambda: "git main" in str(bar.render()), what="git")
        subprocess.run(["git", "checkout", "-q", "-b", "feature"], cwd=layout.workspace, check=True)
        await until(pilot, lambda: "git feature" in str(bar.render()), what="the new branch")
        verbs.stop(layout, run_id, now=True)
        await until(pilot, lambda: "nothing running" in str(bar.render()), what="the end")


async def test_e_o_t_name_the_file_when_the_terminal_cannot_be_handed_over(
    layout: Layout, cli: CLI
) -> None:
    """Guards the file keys where no terminal can be handed over (the test driver; the
    real hand-over is in test_tmux.py): each names the file it would open."""
    write_flow(layout.workspace, "lint", RETURNS_AT_ONCE)
    cli("run", "lint", check=0)
    run_id = list_run_ids(layout)[0]
    app = RecordingApp(layout)
    async with app.run_test(size=SIZE) as pilot:
        main = app.main_screen
        await until(pilot, lambda: main.selected_run == run_id, what="the run")
        await pilot.press("o")
        await until(pilot, lambda: app.heard(f"{run_id}/state.json"), what="state.json")
        await pilot.press("e")
        await until(pilot, lambda: app.heard("flows/lint/flow.py"), what="flow.py")
        await pilot.press("t")
        await until(pilot, lambda: app.heard(f"run {run_id} has no transcript"), what="none")
        assert app.is_running


# -- 80×24 -----------------------------------------------------------------------------------


def cursor_in_view(table: Any) -> bool:
    top = round(table.scroll_y)
    visible = table.scrollable_content_region.height - 1  # less the header row
    return top <= table.cursor_row < top + visible


async def test_at_80x24_the_selected_flow_stays_in_view_as_the_list_changes(
    layout: Layout,
) -> None:
    """Guards item 6: at 80×24 the selected flow scrolled out of view while the runs pane
    named it. The list is as tall as it can be, and a rebuilt list keeps the cursor row
    on screen; the footer is packed to fit."""
    names = [f"flow{n:02d}" for n in range(12)]
    for name in names:
        write_flow(layout.workspace, name, RETURNS_AT_ONCE)
    app = RecordingApp(layout)
    async with app.run_test(size=(80, 24)) as pilot:
        main = app.main_screen
        await until(pilot, lambda: settled(app), what="the first reads")
        assert main.has_class("-narrow") and main.has_class("-short")
        assert main.flows.scrollable_content_region.height >= 6  # header and 5+ flows
        await pilot.press("G")
        await until(pilot, lambda: main.selected_flow == names[-1], what="the last flow")
        await pilot.pause(0.1)
        assert cursor_in_view(main.flows)
        # a new row on top rebuilds the list
        write_flow(layout.workspace, "aaa-new", RETURNS_AT_ONCE)
        await until(pilot, lambda: "aaa-new" in main.flows.rows, what="the new flow")
        await until(pilot, lambda: settled(app), what="described")
        await pilot.pause(0.2)
        assert main.flows.selected_name == names[-1] == main.selected_flow
        assert cursor_in_view(main.flows)
        assert "LAST RUN" not in [str(c.label) for c in main.flows.columns.values()]
        assert main.query_one("Footer").compact
        await pilot.resize_terminal(120, 36)
        await until(pilot, lambda: not main.has_class("-narrow"), what="wide again")
        assert "LAST RUN" in [str(c.label) for c in main.flows.columns.values()]
        assert "PICKED UP FROM" in [str(c.label) for c in main.runs.columns.values()]


async def test_a_key_acts_on_the_store_when_the_runs_pane_is_behind(
    layout: Layout, cli: CLI
) -> None:
    """Guards a remote CI failure: the run had paused, the runs pane (read on its own
    change, a moment later; in remote mode, from a replica) still showed it running, and
    ``x`` said "no paused run to close". A key that finds no run in the state it acts on
    now syncs and reads the runs again before it says so — once a key, never in a loop."""
    run_id = paused_mid_run(layout.workspace, cli, "held", ITEMS_HELD_BY_GATE)
    app = RecordingApp(layout)
    async with app.run_test(size=SIZE) as pilot:
        main = app.main_screen
        await until(pilot, lambda: main.selected_run == run_id, what="the paused run")
        await until(pilot, lambda: settled(app), what="the first reads")
        reads: list[str] = []
        read_runs = main.reads.read_runs

        def counted(key: str, synced: bool = False) -> None:
            reads.append(key)
            read_runs(key, synced)

        main.reads.read_runs = counted  # type: ignore[method-assign]
        # The runs pane one read behind: the run as it was while it ran.
        main.runs.runs[run_id] = replace(main.runs.runs[run_id], status=Status.RUNNING)
        await pilot.press("x")
        await until(pilot, lambda: asked(app, CloseRunModal), what="asked")
        assert not app.heard("has no paused run to close")
        assert main.runs.runs[run_id].status == Status.PAUSED and reads == ["held"]
        await pilot.press("n")
        await until(pilot, lambda: app.screen is main, what="kept")
        # Nothing live to pause, before and after the second look: said once per key.
        await pilot.press("p")
        await until(pilot, lambda: app.heard("has no live run to pause"), what="told")
        await pilot.press("p")
        await until(
            pilot, lambda: sum("no live run to pause" in s for s in app.said) == 2, what="again"
        )
        assert reads == ["held"] * 3
        assert status(layout, run_id) == Status.PAUSED
