"""A question already on screen is never asked again: keys pressed fast twice (enter
enter, x x, n n) show one dialog, and the app goes on (no ``DuplicateIds`` crash)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from textual import events
from textual.message import Message

from flowdrop_tui.core.paths import Layout
from flowdrop_tui.core.records.run_record.run_fold import list_run_ids, load_run
from flowdrop_tui.core.records.run_record.run_info import Status
from flowdrop_tui.core.run import forecast
from flowdrop_tui.tui.screens.close_run_modal import CloseRunModal
from flowdrop_tui.tui.screens.confirm_modal import ConfirmModal
from flowdrop_tui.tui.screens.fresh_run_modal import FreshRunModal
from flowdrop_tui.tui.screens.pick_up_modal import PickUpModal
from tests.conftest import CLI, paused_mid_run
from tests.flow_bodies import ABC_HELD_BY_GATE, THREE_ROUNDS_A_RUN
from tests.tui.tui_helpers import RecordingApp, asked, settled, until

SIZE = (80, 24)


def questions(app: RecordingApp) -> list[ConfirmModal]:
    return [screen for screen in app.screen_stack if isinstance(screen, ConfirmModal)]


async def test_enter_enter_on_a_run_to_pick_up_asks_once(
    layout: Layout, flow_writer: Callable[[str, str], Path], cli: CLI
) -> None:
    """Guards the crash a reviewer hit: enter, enter fast on a flow whose last run can be
    picked up pushed the pick-up dialog twice (``DuplicateIds``, exit 1)."""
    flow_writer("three", THREE_ROUNDS_A_RUN)
    cli("run", "three", check=0)
    first = list_run_ids(layout)[0]
    app = RecordingApp(layout)
    async with app.run_test(size=SIZE) as pilot:
        main = app.main_screen
        await until(pilot, lambda: main.selected_run == first, what="the run listed")
        await until(pilot, lambda: main.flows.selected_name == "three", what="the flow")
        main.flows.focus()
        await pilot.press("enter", "enter")
        # On a busy machine the second enter may confirm the preview before this looks.
        await until(
            pilot,
            lambda: isinstance(app.screen, PickUpModal) or len(list_run_ids(layout)) == 2,
            what="the preview (or the pick-up it confirmed)",
        )
        await until(pilot, lambda: settled(app), what="both enters handled")
        await pilot.pause(0.3)
        assert app.is_running and app.return_code is None
        assert len(questions(app)) <= 1  # the second enter confirmed it, or did nothing
        if questions(app):
            await pilot.press("escape")
            await until(pilot, lambda: not questions(app), what="cancelled")
            assert list_run_ids(layout) == [first]
        else:  # confirmed: one pick-up started, not two
            await until(pilot, lambda: len(list_run_ids(layout)) == 2, what="the pick-up")
        await pilot.pause(0.3)
        assert not questions(app) and len(list_run_ids(layout)) <= 2


async def test_x_x_on_a_paused_run_asks_once(layout: Layout, cli: CLI) -> None:
    """Guards the same for closing a paused run: x x shows one question, y closes it."""
    run_id = paused_mid_run(layout.workspace, cli, "held", ABC_HELD_BY_GATE)
    app = RecordingApp(layout)
    async with app.run_test(size=SIZE) as pilot:
        main = app.main_screen
        await until(pilot, lambda: main.selected_run == run_id, what="the run listed")
        await until(pilot, lambda: main.runs.runs[run_id].status == Status.PAUSED, what="shown")
        await pilot.press("x", "x")
        await until(pilot, lambda: asked(app, CloseRunModal), what="the question")
        await pilot.pause(0.3)
        assert len(questions(app)) == 1
        await pilot.press("y")
        await until(pilot, lambda: app.heard("it is now closed cancelled"), what="the close")
        assert not questions(app)
        assert load_run(layout, run_id).status == Status.CANCELLED


async def test_n_n_never_stacks_and_an_open_question_is_not_asked_over(
    layout: Layout, flow_writer: Callable[[str, str], Path], cli: CLI
) -> None:
    """Guards fresh-run and the palette's way in: n n shows at most one question (the
    second n may answer it: no), and asking again while it is open (the same or
    another question, with no focus involved) shows nothing more."""
    flow_writer("three", THREE_ROUNDS_A_RUN)
    cli("run", "three", check=0)
    app = RecordingApp(layout)
    async with app.run_test(size=SIZE) as pilot:
        main = app.main_screen
        await until(pilot, lambda: main.flows.selected_name == "three", what="the flow")
        await until(pilot, lambda: main.selected_run is not None, what="the run listed")
        main.flows.focus()
        await pilot.press("n", "n")
        await pilot.pause(0.5)
        await until(pilot, lambda: settled(app), what="both presses handled")
        assert app.return_code is None and len(questions(app)) <= 1
        assert len(list_run_ids(layout)) == 1  # nothing started
        if not questions(app):
            await pilot.press("n")
        await until(pilot, lambda: asked(app, FreshRunModal), what="the question")
        await main.run_action("fresh_run")  # the palette's way: no focus involved
        await main.run_action("run_flow")  # another question (pick-up) while this one is open
        await pilot.pause(0.5)
        await until(pilot, lambda: settled(app), what="the plans read")
        assert app.return_code is None
        assert len(questions(app)) == 1 and isinstance(app.screen, FreshRunModal)
        assert app.heard("a question is open (Start three fresh?): answer it first")
        await pilot.press("n")
        await until(pilot, lambda: not questions(app), what="cancelled")
        assert len(list_run_ids(layout)) == 1


async def test_p_says_the_round_it_pauses_after_in_the_cli_words(
    layout: Layout, flow_writer: Callable[[str, str], Path]
) -> None:
    """Guards the pause words: p says what ``flowdrop-tui pause`` says (the round in
    flight), and the run does pause after that round."""
    flow_writer("held", ABC_HELD_BY_GATE)
    gate = layout.workspace / "hold"
    gate.write_text("")
    app = RecordingApp(layout)
    async with app.run_test(size=SIZE) as pilot:
        main = app.main_screen
        await until(pilot, lambda: main.flows.selected_name == "held", what="the flow")
        main.flows.focus()
        await pilot.press("enter")
        await until(pilot, lambda: main.tracker.live, what="the launch")
        run_id = next(iter(main.tracker.live))
        await until(pilot, lambda: load_run(layout, run_id).round == 1, what="round 1 in flight")
        await until(pilot, lambda: main.selected_run == run_id, what="the run selected")
        await pilot.press("p")
        said = f"run {run_id} will pause after round 1 — r resumes it"
        await until(pilot, lambda: app.heard(said), what="the pause asked")
        gate.unlink()
        await until(pilot, lambda: load_run(layout, run_id).status == Status.PAUSED, what="paused")
        assert load_run(layout, run_id).round == 1


async def test_a_late_preview_is_never_confirmed_by_an_enter_typed_before_it(
    layout: Layout,
    flow_writer: Callable[[str, str], Path],
    cli: CLI,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Guards issue 26 item 6: under load the preview took 0.4–0.8 s and an enter typed
    before it appeared, still queued when it was pushed, confirmed it unseen. The plan
    read is held here (the real one, run once the hold is let go); ``enter enter`` is
    typed meanwhile, and one more enter typed then reaches the app only after the
    preview was pushed (a busy loop). None of them answers it: the preview stays on
    screen and nothing starts, until a key typed after it was painted confirms it."""
    flow_writer("three", THREE_ROUNDS_A_RUN)
    cli("run", "three", check=0)
    first = list_run_ids(layout)[0]
    reading, hold = threading.Event(), threading.Event()
    real = forecast.forecast_flow

    def held(*args: Any, **kwargs: Any) -> forecast.Forecast:
        reading.set()
        assert hold.wait(60)
        return real(*args, **kwargs)

    monkeypatch.setattr(forecast, "forecast_flow", held)
    seen: list[Message] = []
    app = RecordingApp(layout)
    async with app.run_test(size=SIZE, message_hook=seen.append) as pilot:
        main = app.main_screen
        await until(pilot, lambda: main.selected_run == first, what="the run listed")
        await until(pilot, lambda: settled(app), what="the first reads")
        main.flows.focus()
        await pilot.press("enter", "enter")
        await until(pilot, reading.is_set, what="the plan being read")
        typed = events.Key("enter", "\r")  # typed now; it reaches the app late
        hold.set()
        # Pushed, maybe not yet painted: the late enter arrives now, as it did under load.
        await until(pilot, lambda: isinstance(app.screen, PickUpModal), what="the preview")
        app.post_message(typed)
        await until(pilot, lambda: typed in seen, what="the late enter handled")
        modal = app.screen
        assert isinstance(modal, PickUpModal)
        await until(pilot, lambda: modal.shown_at is not None, what="the preview painted")
        await until(pilot, lambda: settled(app), what="nothing more in flight")
        assert app.screen is modal and questions(app) == [modal]
        assert list_run_ids(layout) == [first]  # nothing started
        assert typed.time < modal.shown_at
        await pilot.press("enter")  # seen, then confirmed: the pick-up goes ahead
        await until(pilot, lambda: len(list_run_ids(layout)) == 2, what="the pick-up")
        assert not questions(app)
