"""The remote UI keeps what a team needs in view without a key pressed (issue 38, items
4, 6, 9 and 11): a start waiting for a worker, the live run of a flow this checkout
lacks, a paused run closed on another machine, and the top line's space. Textual's
pilot on a client that runs nothing itself; records reach it only through PostgreSQL."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from textual.widgets import Static

from flowdrop_tui.core.paths import Layout
from flowdrop_tui.core.remote import reading
from flowdrop_tui.core.remote.config import RemoteConfig
from flowdrop_tui.core.remote.daemon.write_through import RunTicket
from flowdrop_tui.core.remote.postgres.store import PostgresStore
from flowdrop_tui.core.remote.remote_mode import RemoteMode
from flowdrop_tui.core.remote.start.start_requests import StartTable
from flowdrop_tui.tui.app import FlowdropApp
from flowdrop_tui.tui.widgets.workspace_bar import WorkspaceBar
from tests.conftest import write_flow
from tests.flow_bodies import counts_rounds
from tests.remote.machines import WorkerChild, clone, make_origin, plain_env
from tests.remote.test_what_a_team_sees import queue_start
from tests.tui.tui_helpers import until

SIZE = (140, 36)
WAIT = 60.0  # seconds for each step: PostgreSQL, run children and the UI share 2 busy cores

ASKS = """
    from flowdrop_tui import flow

    @flow(resumable=True)
    def main(run):
        for n in run.rounds():
            run.state["n"] = n
            run.ask(f"go on after {n}?", choices=["yes", "no"])
"""


def open_app(client: Path, postgres_url: str, space: str) -> FlowdropApp:
    remote = RemoteConfig(temporal="127.0.0.1:9", postgres=postgres_url, space=space)
    layout = Layout(client)
    reading.synced(layout, remote)  # as `flowdrop-tui` does before the UI opens
    return FlowdropApp(layout, RemoteMode(layout, remote))


def bar_text(app: FlowdropApp) -> str:
    return str(app.screen.query_one(WorkspaceBar).render())


def flow_row(app: FlowdropApp, flow: str) -> dict[str, object]:
    return dict(app._main().flows.rows_by_name.get(flow) or {})


def close_on_another_worker(
    pg_store: PostgresStore, postgres_url: str, space: str, worker_ws: Path, run_id: str
) -> None:
    """``stop`` of the paused run ``run_id`` of `asks`, as a second worker (w2) does it
    holding the key: the close happens elsewhere, never through the UI under test."""
    epoch = pg_store.claim("asks", worker="w2")
    ticket = RunTicket(postgres_url, space, "asks", epoch, "w2")
    closed = subprocess.run(
        [sys.executable, "-m", "flowdrop_tui", "stop", run_id, "--json"],
        cwd=worker_ws,
        env={**plain_env(), **ticket.env()},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert closed.returncode == 0, closed.stderr


async def test_the_top_line_shows_a_queued_start_and_a_flow_not_in_this_checkout(
    tmp_path: Path, postgres_url: str, space: str, pg_store: PostgresStore
) -> None:
    """Guards against a start waiting for a worker that the UI never showed (item 4),
    and against a live run hidden because this checkout lacks its flow (item 6): the
    flow's row says `queued` and the top line `queued, waiting for a worker` until the
    start is withdrawn; the other flow's live run is in the top line as running."""
    origin = make_origin(tmp_path, {"counter": counts_rounds(sleep=0.2)})
    client = clone(origin, tmp_path / "client")
    worker_ws = clone(origin, tmp_path / "w1")
    write_flow(worker_ws, "branchy", counts_rounds(sleep=0.2))  # not in the client's checkout
    app = open_app(client, postgres_url, space)
    child = None
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: "counter" in app._main().flows.rows_by_name, what="flows")
        assert "queued" not in bar_text(app)
        start = queue_start(pg_store, "counter")
        await until(
            pilot,
            lambda: "1 queued, waiting for a worker: counter" in bar_text(app),
            timeout=WAIT,
            what="the queued start in the top line",
        )
        assert flow_row(app, "counter").get("queued") is True
        cells = app._main().flows.get_row("counter")
        assert any(str(cell) == "queued" for cell in cells), cells
        assert StartTable(pg_store).withdraw(start)
        await until(
            pilot,
            lambda: "queued" not in bar_text(app),
            timeout=WAIT,
            what="the withdrawn start gone from the top line",
        )
        try:
            child = WorkerChild(worker_ws, postgres_url, space, "branchy", worker="w1")
            await until(
                pilot,
                lambda: "1 running: branchy" in bar_text(app),
                timeout=WAIT,
                what="branchy's live run in the top line",
            )
            assert "not in this checkout" in str(flow_row(app, "branchy").get("error"))
        finally:
            if child is not None:
                child.close()


async def test_a_paused_run_closed_elsewhere_leaves_the_runs_pane_on_its_own(
    tmp_path: Path, postgres_url: str, space: str, pg_store: PostgresStore
) -> None:
    """Guards against the remote Runs pane keeping a closed run `paused` until a key
    was pressed (item 9): a paused run closed on its worker's machine (`stop RUN`
    through the mirror, as a worker's close does) reads `cancelled` in the Runs pane
    and the flow's row with no key pressed. The Run pane names the worker that ran it
    (item 11)."""
    origin = make_origin(tmp_path, {"asks": ASKS})
    client = clone(origin, tmp_path / "client")
    worker_ws = clone(origin, tmp_path / "w1")
    child = WorkerChild(worker_ws, postgres_url, space, "asks", worker="w1")
    try:
        assert child.wait() == 0  # paused on its question: the process ends
    finally:
        child.close()
    run_id = child.run_id
    app = open_app(client, postgres_url, space)
    async with app.run_test(size=SIZE) as pilot:
        main = app._main()
        await until(
            pilot,
            lambda: (
                main.selected_flow == "asks"
                and run_id in main.runs.runs
                and str(main.runs.runs[run_id].status) == "paused"
            ),
            timeout=WAIT,
            what="the paused run in the Runs pane",
        )
        text = main.detail.query_one("#detail-text", Static)
        await until(
            pilot,
            lambda: "worker w1 on " in str(text.render()),  # its host: the child's or ours
            timeout=WAIT,
            what="the Run pane naming the worker that ran it",
        )
        close_on_another_worker(pg_store, postgres_url, space, worker_ws, run_id)
        await until(
            pilot,
            lambda: str(main.runs.runs[run_id].status) == "cancelled",
            timeout=WAIT,
            what="the Runs pane saying cancelled with no key pressed",
        )
        assert flow_row(app, "asks").get("status") == "cancelled"


async def test_a_paused_run_closed_elsewhere_is_refreshed_while_another_run_is_selected(
    tmp_path: Path, postgres_url: str, space: str, pg_store: PostgresStore
) -> None:
    """Guards the Runs pane's refresh when the closed run is not the one the cursor is
    on (item 9): its folder is not followed (neither selected nor live), so no change
    of its files reaches the UI; the index's entry, which every status change rewrites,
    must bring the row from `paused` to `cancelled` with no key pressed."""
    origin = make_origin(tmp_path, {"asks": ASKS})
    client = clone(origin, tmp_path / "client")
    worker_ws = clone(origin, tmp_path / "w1")
    runs = []
    for args in ((), ("--fresh",)):  # two paused runs: the newest is the one closed
        child = WorkerChild(worker_ws, postgres_url, space, "asks", args, worker="w1")
        try:
            assert child.wait() == 0
        finally:
            child.close()
        runs.append(child.run_id)
    older, newest = runs
    app = open_app(client, postgres_url, space)
    async with app.run_test(size=SIZE) as pilot:
        main = app._main()
        await until(
            pilot,
            lambda: main.selected_flow == "asks" and {older, newest} <= set(main.runs.runs),
            timeout=WAIT,
            what="both runs in the Runs pane",
        )
        main.set_focus(main.runs)
        await pilot.press("down")  # the cursor on the older run: the newest is not followed
        await until(pilot, lambda: main.selected_run == older, what="the older run selected")
        close_on_another_worker(pg_store, postgres_url, space, worker_ws, newest)
        await until(
            pilot,
            lambda: str(main.runs.runs[newest].status) == "cancelled",
            timeout=WAIT,
            what="the closed run's row saying cancelled with no key pressed",
        )
        assert main.selected_run == older and str(main.runs.runs[older].status) == "paused"
