"""The keys that stop and pause a run, under Textual's pilot with an in-process mode:
the run is seeded as a record whose holder is elsewhere (a replica's live marker), so
no run process starts; the mode records what the keys asked of it and takes the
requests as local mode does (a request file in the run's record).

The same keys against real detached runs: tests/tui/test_run_keys.py."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

from flowdrop_tui.core.control import requests, verbs
from flowdrop_tui.core.mode import LocalMode
from flowdrop_tui.core.paths import REMOTE_LIVE, Layout
from flowdrop_tui.tui.widgets.filter_bar import FilterBar
from tests.flow_bodies import counts_rounds
from tests.seeded_records import reindex, seed_run
from tests.tui.tui_helpers import RecordingApp, settled
from tests.waiting import until

SIZE = (120, 36)
RUN = "20260817T010000.000Z-eeeeee"


class InProcessMode(LocalMode):
    """Local mode, every stop and pause asked of it kept in ``asked`` before it is
    taken as local mode takes it."""

    def __init__(self, layout: Layout) -> None:
        super().__init__(layout)
        self.asked: list[tuple[str, str, bool, dict[str, Any] | None]] = []

    def stop(
        self,
        run_id: str,
        *,
        now: bool,
        by: dict[str, Any] | None = None,
        keep_paused: bool = False,
    ) -> verbs.Asked:
        self.asked.append(("stop", run_id, now, by))
        return super().stop(run_id, now=now, by=by, keep_paused=keep_paused)

    def pause(self, run_id: str, *, by: dict[str, Any] | None = None) -> verbs.Asked:
        self.asked.append(("pause", run_id, False, by))
        return super().pause(run_id, by=by)


def in_process_app(layout: Layout) -> tuple[RecordingApp, InProcessMode]:
    """The real app on an in-process mode, remembering what it said (toasts expire)."""
    mode = InProcessMode(layout)
    return RecordingApp(layout, mode), mode


def live_run(ws: Path, flow_writer: Callable[[str, str], Path]) -> Path:
    """Flow ``alpha`` with a run that is live, three rounds in, held by another machine."""
    flow_writer("alpha", counts_rounds(description="counts"))
    seed_run(ws, RUN, "alpha", outcome=None, last_round=3)
    folder = ws / ".flowdrop" / "runs" / RUN
    marker = {"pid": 1, "host": "elsewhere", "worker": "w", "key": "alpha", "epoch": 1}
    (folder / REMOTE_LIVE).write_bytes(orjson.dumps({**marker, "since": 0}))
    reindex(ws)
    return folder


def ended(folder: Path, outcome: str) -> None:
    """The run's part: it takes the stop, records its end and lets go of the run."""
    line = {"t": "2026-08-17T01:09:00.000Z", "event": "ended", "outcome": outcome}
    with (folder / "cycle.jsonl").open("ab") as handle:
        handle.write(orjson.dumps({**line, "result": None, "error": None, "round": 3}) + b"\n")
    (folder / REMOTE_LIVE).unlink()


async def test_escape_asks_a_stop_after_the_round_then_a_stop_now(
    workspace: Path, flow_writer: Callable[[str, str], Path]
) -> None:
    """Guards escape (SPEC §12): the first press asks the live run to stop after its
    round, the second to stop now, each through the mode and said in words; the end
    the run records then shows on the flow's row."""
    folder = live_run(workspace, flow_writer)
    app, mode = in_process_app(Layout(workspace))
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: settled(app), what="the first reads")
        await pilot.press("escape")
        await until(pilot, lambda: app.heard("escape again to stop now"), what="the stop")
        assert mode.asked == [("stop", RUN, False, {"via": "ui"})]
        assert requests.is_pending(folder, requests.STOP)
        await pilot.press("escape")
        await until(pilot, lambda: app.heard(f"stopping run {RUN} now"), what="stop now")
        assert mode.asked[1] == ("stop", RUN, True, {"via": "ui"})
        assert requests.is_pending(folder, requests.STOP_NOW)
        ended(folder, "cancelled")
        main = app.main_screen
        await until(
            pilot,
            lambda: str(main.flows.get_cell("alpha", "status")) == "cancelled",
            what="the end on the flow's row",
        )


async def test_escape_first_closes_the_filter_and_stops_nothing(
    workspace: Path, flow_writer: Callable[[str, str], Path]
) -> None:
    """Guards "escape first closes whatever is open, and that press does nothing else"."""
    folder = live_run(workspace, flow_writer)
    app, mode = in_process_app(Layout(workspace))
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: settled(app), what="the first reads")
        main = app.main_screen
        bar = main.query_one(FilterBar)
        await pilot.press("slash")
        await until(pilot, lambda: bar.display and app.focused is bar, what="the filter open")
        await pilot.press("escape")
        await until(pilot, lambda: not bar.display, what="the filter closed")
        assert mode.asked == []
        assert not requests.is_pending(folder, requests.STOP)


async def test_escape_leaves_a_paused_run_paused_and_p_asks_a_pause(
    workspace: Path, flow_writer: Callable[[str, str], Path]
) -> None:
    """Guards "a paused run is never closed by escape", and ``p`` reaching the mode."""
    folder = live_run(workspace, flow_writer)
    app, mode = in_process_app(Layout(workspace))
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: settled(app), what="the first reads")
        await pilot.press("p")
        await until(pilot, lambda: mode.asked, what="the pause asked")
        assert mode.asked == [("pause", RUN, False, {"via": "ui"})]
        assert requests.is_pending(folder, requests.PAUSE)
        position = {"currentNodeId": "", "iterationCount": 3, "iterator": None}
        line = {"t": "2026-08-17T01:09:00.000Z", "event": "paused", "round": 3}
        with (folder / "cycle.jsonl").open("ab") as handle:
            handle.write(orjson.dumps({**line, "position": position}) + b"\n")
        (folder / REMOTE_LIVE).unlink()
        main = app.main_screen
        await until(
            pilot,
            lambda: str(main.flows.get_cell("alpha", "status")) == "paused",
            what="the pause on the flow's row",
        )
        await pilot.press("escape")
        await until(pilot, lambda: app.heard("escape leaves it so"), what="the answer")
        assert [kind for kind, *_ in mode.asked] == ["pause"]
