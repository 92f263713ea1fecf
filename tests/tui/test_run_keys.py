"""The keys that act on runs, with real detached runs in real workspaces."""

from __future__ import annotations

import contextlib
import re
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

from textual.pilot import Pilot
from textual.widgets import Button, Static

from flowdrop_tui.core.paths import Layout
from flowdrop_tui.core.records.run_record.run_fold import list_run_ids, load_run
from flowdrop_tui.core.records.run_record.run_info import ENDED, Status
from flowdrop_tui.tui.screens.fresh_run_modal import FreshRunModal
from flowdrop_tui.tui.screens.pick_up_modal import PickUpModal
from flowdrop_tui.tui.widgets.run_detail import RunDetail
from tests.conftest import CLI, events, paused_mid_run
from tests.flow_bodies import ABC_HELD_BY_GATE, ONE_LONG_ROUND, THREE_ROUNDS_A_RUN, counts_rounds
from tests.tui.tui_helpers import RecordingApp, asked, until

SIZE = (120, 36)

TICKING = counts_rounds(sleep=0.2, description="a round every 0.2 s")


BATCH = """
    import time
    from flowdrop_tui import flow

    @flow(resumable=True, description="forty items")
    def main(run):
        done = run.state.setdefault("done", [])
        # long enough (12 s) that a pause pressed on a loaded machine lands mid-batch
        for item in run.rounds([f"item{i}" for i in range(40)]):
            time.sleep(0.3)
            run.state["done"] = [*done, item]
            done = run.state["done"]
        return len(done)
"""


CAPPED = """
    import time
    from flowdrop_tui import flow

    @flow(resumable=True, budget={"rounds": 2})
    def main(run):
        for round in run.rounds():
            run.state["n"] = round
            time.sleep(0.5)  # seen live before it pauses, however loaded the machine
"""


def status(layout: Layout, run_id: str) -> Status:
    return load_run(layout, run_id).status


async def launched(pilot: object, app: RecordingApp) -> str:
    """The run enter started: still arriving, followed live, or — on a busy machine, a
    run that paused or ended before this looked — the one its launch announced."""
    main = app.main_screen

    def found() -> str | None:
        if main.arriving:
            return main.arriving
        if main.selected_run in main.tracker.live:
            return main.selected_run
        for said in app.said:
            announced = re.match(r"run (\S+) of \S+: ", said)
            if announced:
                return announced.group(1)
        return None

    return str(await until(pilot, found, what="a launch"))  # type: ignore[arg-type]


@contextlib.asynccontextmanager
async def started_from_ui(
    layout: Layout, flow_writer: Callable[[str, str], Path], name: str, body: str
) -> AsyncIterator[tuple[RecordingApp, Pilot[Any], str]]:
    """Flow ``name`` written, the UI open on it, enter pressed: the app, its pilot and
    the run the launch started (the preamble of most tests here)."""
    flow_writer(name, body)
    app = RecordingApp(layout)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.main_screen.flows.selected_name == name, what="the flow")
        await pilot.press("enter")
        yield app, pilot, await launched(pilot, app)


async def test_enter_runs_the_flow_and_its_events_arrive_then_escape_stops_it(
    layout: Layout, flow_writer: Callable[[str, str], Path]
) -> None:
    """Guards the loop of the issue: enter launches, events stream in, escape stops after
    the round with the promised words, and the end is announced."""
    flow_writer("tick", TICKING)
    app = RecordingApp(layout)
    async with app.run_test(size=SIZE) as pilot:
        main = app.main_screen
        await until(pilot, lambda: main.flows.selected_name == "tick", what="the flow")
        await pilot.press("enter")
        await until(pilot, lambda: app.heard("fresh, round 1"), what="the launch")
        run_id = next(iter(main.tracker.live))
        await until(pilot, lambda: main.selected_run == run_id, what="the new run selected")
        await until(pilot, lambda: main.feed.shown >= 6, what="events on screen")
        assert any("round_started" in line for line in main.feed.lines)
        await until(
            pilot,
            lambda: str(main.flows.get_cell("tick", "round")) not in ("no rounds yet", "round 1"),
            what="the round counter moving",
        )
        await pilot.press("escape")
        await until(pilot, lambda: app.heard("— escape again to stop now"), what="the stop")
        assert any(text.startswith("stopping after round ") for text in app.said)
        await until(
            pilot,
            lambda: app.heard(f"run {run_id} of tick stopped after round"),
            what="the end announced",
        )
        assert status(layout, run_id) == Status.CANCELLED
        assert str(main.flows.get_cell("tick", "status")) == "cancelled"
        stops = [ev for ev in events(layout.workspace, run_id) if ev["event"] == "stop_requested"]
        assert stops[0]["now"] is False and stops[0]["by"]["via"] == "ui"


async def test_escape_twice_stops_the_round_in_flight(
    layout: Layout, flow_writer: Callable[[str, str], Path]
) -> None:
    """Guards the second escape: it interrupts a round that would otherwise last minutes."""
    async with started_from_ui(layout, flow_writer, "slow", ONE_LONG_ROUND) as started:
        app, pilot, run_id = started
        main = app.main_screen
        await until(
            pilot,
            lambda: any("round_started" in line for line in main.feed.lines),
            what="the round in flight",
        )
        await pilot.press("escape")
        await until(pilot, lambda: load_run(layout, run_id).stop_pending, what="stop recorded")
        assert status(layout, run_id) == Status.RUNNING  # the round goes on
        await pilot.press("escape")
        await until(pilot, lambda: app.heard(f"stopping run {run_id} now"), what="stop now")
        await until(pilot, lambda: status(layout, run_id) in ENDED, what="the run ended")
        assert status(layout, run_id) == Status.CANCELLED
        nows = [
            ev["now"] for ev in events(layout.workspace, run_id) if ev["event"] == "stop_requested"
        ]
        assert nows == [False, True]


async def test_enter_shows_the_pick_up_and_the_rounds_go_on(
    layout: Layout, flow_writer: Callable[[str, str], Path], cli: CLI
) -> None:
    """Guards the pick-up preview (source, next round, state keys) and its promise."""
    flow_writer("three", THREE_ROUNDS_A_RUN)
    cli("run", "three", check=0)
    first = list_run_ids(layout)[0]
    app = RecordingApp(layout)
    async with app.run_test(size=SIZE) as pilot:
        main = app.main_screen
        await until(pilot, lambda: main.selected_run == first, what="the run listed")
        await pilot.press("enter")
        modal = await until(pilot, lambda: asked(app, PickUpModal), what="the preview")
        assert modal.forecast.source_id == first
        assert modal.forecast.next_round == 4
        assert modal.forecast.state_keys == ["n"]
        await until(pilot, lambda: modal.query("#pick-up-plan"), what="the preview composed")
        shown = str(modal.query_one("#pick-up-plan", Static).render())
        assert "budget       rounds 3/10" in shown  # used along the chain / the declared limit
        # The buttons are mounted after the plan: on a busy machine a frame can fall
        # between the two, so wait for the button as a person waits to see it.
        await until(pilot, lambda: modal.query("#confirm"), what="the confirm button")
        confirm = modal.query_one("#confirm", Button)
        await until(pilot, lambda: app.focused is confirm, what="confirm focused")
        await pilot.press("y")
        await until(pilot, lambda: len(list_run_ids(layout)) == 2, what="the new run")
        second = list_run_ids(layout)[1]
        await until(pilot, lambda: status(layout, second) == Status.COMPLETED, what="its end")
        await until(
            pilot,
            lambda: (
                main.runs.runs.get(second) is not None
                and main.runs.runs[second].status == Status.COMPLETED
            ),
            what="shown ended",
        )
        assert str(main.runs.get_cell(second, "rounds")) == "4–6"
        assert str(main.runs.get_cell(second, "source")) == first
        assert str(main.flows.get_cell("three", "round")) == "round 6"


async def test_enter_on_an_older_run_picks_up_from_that_run(
    layout: Layout, flow_writer: Callable[[str, str], Path], cli: CLI
) -> None:
    """Guards ``--from``: the preview and the new run name the run the cursor is on."""
    flow_writer("three", THREE_ROUNDS_A_RUN)
    cli("run", "three", check=0)
    cli("run", "three", check=0)
    older, newer = list_run_ids(layout)
    app = RecordingApp(layout)
    async with app.run_test(size=SIZE) as pilot:
        main = app.main_screen
        await until(pilot, lambda: main.selected_run == newer, what="the runs listed")
        main.runs.focus()
        await pilot.press("down")
        await until(pilot, lambda: main.selected_run == older, what="the older run selected")
        await pilot.press("enter")
        modal = await until(pilot, lambda: asked(app, PickUpModal), what="the preview")
        assert modal.forecast.source_id == older and modal.forecast.next_round == 4
        await pilot.press("escape")
        await until(pilot, lambda: not isinstance(app.screen, PickUpModal), what="cancelled")
        assert len(list_run_ids(layout)) == 2  # cancelling started nothing


async def test_p_pauses_a_batch_and_r_resumes_it_in_the_same_run(
    layout: Layout, flow_writer: Callable[[str, str], Path]
) -> None:
    """Guards pause and resume from the keyboard, each announced with what happens next."""
    async with started_from_ui(layout, flow_writer, "batch", BATCH) as started:
        app, pilot, run_id = started
        await until(pilot, lambda: status(layout, run_id) == Status.RUNNING, what="running")
        await pilot.press("p")
        await until(pilot, lambda: app.heard("r resumes it"), what="the pause asked")
        await until(
            pilot,
            lambda: app.heard(f"run {run_id} of batch paused after round"),
            what="the pause announced",
        )
        assert status(layout, run_id) == Status.PAUSED
        await pilot.press("r")
        await until(pilot, lambda: app.heard("resumed at round"), what="the resume")
        await until(pilot, lambda: app.heard(f"run {run_id} of batch completed"), what="the end")
        assert list_run_ids(layout) == [run_id]  # resuming continued the same run
        assert status(layout, run_id) == Status.COMPLETED


async def test_r_on_a_paused_batch_whose_code_changed_shows_the_drift_first(
    layout: Layout, flow_writer: Callable[[str, str], Path], cli: CLI
) -> None:
    """Guards SPEC §15 in the UI: the pause/edit/resume repro is shown before it resumes
    (the same answer as ``plan``), and confirming resumes the same run."""
    run_id = paused_mid_run(layout.workspace, cli, "held", ABC_HELD_BY_GATE)
    flow_file = layout.workspace / "flows" / "held" / "flow.py"
    flow_file.write_text(flow_file.read_text().replace('["a", "b"', '["new", "a", "b"'))
    planned = cli.json("plan", "held")
    app = RecordingApp(layout)
    async with app.run_test(size=SIZE) as pilot:
        main = app.main_screen
        await until(pilot, lambda: main.selected_run == run_id, what="the paused run")
        await pilot.press("r")
        modal = await until(pilot, lambda: asked(app, PickUpModal), what="the preview")
        await until(pilot, lambda: modal.query("#pick-up-plan"), what="the preview composed")
        shown = str(modal.query_one("#pick-up-plan", Static).render())
        assert shown.startswith("Resume held")
        assert planned["warnings"]
        for message in planned["warnings"]:
            assert message in shown  # the same words as plan, stderr and --json
        assert "may no longer match" in shown
        assert modal.forecast.to_json()["drift"] == planned["drift"]
        await pilot.press("y")
        await until(pilot, lambda: app.heard("resumed at round"), what="the resume")
        await until(pilot, lambda: status(layout, run_id) == Status.COMPLETED, what="its end")
        assert list_run_ids(layout) == [run_id]


async def test_a_run_that_pauses_on_its_budget_is_announced(
    layout: Layout, flow_writer: Callable[[str, str], Path]
) -> None:
    """Guards the notification when a watched run pauses on a budget: which, and how to
    go on; the run pane shows used/limit."""
    async with started_from_ui(layout, flow_writer, "capped", CAPPED) as started:
        app, pilot, run_id = started
        main = app.main_screen
        await until(
            pilot,
            lambda: app.heard("rounds budget reached (2 of 2 used)"),
            what="the budget pause announced",
        )
        assert app.heard(f"flowdrop-tui resume {run_id} --max-rounds N")
        assert status(layout, run_id) == Status.PAUSED
        await until(pilot, lambda: main.selected_run == run_id, what="the run selected")
        detail = main.query_one(RunDetail)
        await until(
            pilot,
            lambda: "budget rounds 2/2" in detail.plain_text,
            what="used/limit on the run pane",
        )


async def test_n_asks_before_dropping_a_state_that_could_be_picked_up(
    layout: Layout, flow_writer: Callable[[str, str], Path], cli: CLI
) -> None:
    """Guards the fresh run: asked first, then round 1 with an empty state."""
    flow_writer("three", THREE_ROUNDS_A_RUN)
    cli("run", "three", check=0)
    app = RecordingApp(layout)
    async with app.run_test(size=SIZE) as pilot:
        main = app.main_screen
        await until(pilot, lambda: main.selected_run is not None, what="the run listed")
        await pilot.press("n")
        await until(pilot, lambda: asked(app, FreshRunModal), what="the question")
        assert app.focused is app.screen.query_one("#cancel", Button)  # the safe answer first
        await pilot.press("y")
        await until(pilot, lambda: len(list_run_ids(layout)) == 2, what="the fresh run")
        fresh = load_run(layout, list_run_ids(layout)[1])
        assert fresh.start == "fresh" and fresh.first_round == 1 and fresh.source is None


async def test_a_refusal_is_a_notification_in_plain_words(
    layout: Layout, flow_writer: Callable[[str, str], Path]
) -> None:
    """Guards refusals: enter on a flow that is already running says so and crashes nothing."""
    async with started_from_ui(layout, flow_writer, "slow", ONE_LONG_ROUND) as started:
        app, pilot, run_id = started
        await until(pilot, lambda: status(layout, run_id) == Status.RUNNING, what="running")
        await pilot.press("enter")
        await until(pilot, lambda: app.heard("is already running"), what="the refusal")
        assert app.is_running
        assert list_run_ids(layout) == [run_id]


async def test_quitting_stops_nothing(
    layout: Layout, flow_writer: Callable[[str, str], Path]
) -> None:
    """Guards the promise that runs outlive the UI."""
    async with started_from_ui(layout, flow_writer, "tick", TICKING) as started:
        app, pilot, run_id = started
        await until(pilot, lambda: status(layout, run_id) == Status.RUNNING, what="running")
        await pilot.press("q")
    assert not app.is_running
    before = load_run(layout, run_id).round
    from tests.conftest import wait_for

    wait_for(lambda: load_run(layout, run_id).round > before + 1)  # it keeps counting
    assert status(layout, run_id) == Status.RUNNING


async def test_a_run_killed_while_watched_shows_as_interrupted(
    layout: Layout, flow_writer: Callable[[str, str], Path]
) -> None:
    """Guards kill -9: no file changes, yet the screen says the run was interrupted."""
    import os
    import signal

    async with started_from_ui(layout, flow_writer, "slow", ONE_LONG_ROUND) as started:
        app, pilot, run_id = started
        main = app.main_screen
        await until(pilot, lambda: status(layout, run_id) == Status.RUNNING, what="running")
        pid = load_run(layout, run_id).live_pid
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
        await until(
            pilot,
            lambda: app.heard(f"run {run_id} of slow was interrupted"),
            what="the death announced",
        )
        await until(
            pilot,
            lambda: str(main.flows.get_cell("slow", "status")) == "interrupted",
            what="the row",
        )


async def test_escape_on_a_paused_run_leaves_it_paused_and_x_asks_before_closing_it(
    layout: Layout, flow_writer: Callable[[str, str], Path]
) -> None:
    """Guards docs/decisions.md, "The terminal UI's keys": escape never closes a paused
    run; x does, once confirmed, and the run is closed cancelled with its state kept for
    a pick-up."""
    async with started_from_ui(layout, flow_writer, "batch", BATCH) as started:
        app, pilot, run_id = started
        main = app.main_screen
        await until(pilot, lambda: status(layout, run_id) == Status.RUNNING, what="running")
        await pilot.press("p")
        await until(pilot, lambda: status(layout, run_id) == Status.PAUSED, what="paused")
        await until(pilot, lambda: main.runs.runs[run_id].status == Status.PAUSED, what="shown")
        await pilot.press("escape")
        await until(pilot, lambda: app.heard("escape leaves it so"), what="the answer")
        assert status(layout, run_id) == Status.PAUSED
        await pilot.press("x", "y")
        await until(pilot, lambda: app.heard("it is now closed cancelled"), what="the close")
        assert status(layout, run_id) == Status.CANCELLED
