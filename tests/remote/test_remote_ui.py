"""The UI in remote mode: one view of the runs of two workers, live, on a machine that
runs nothing itself (Textual's pilot; the records reach it only through PostgreSQL)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from flowdrop_tui.core.paths import Layout
from flowdrop_tui.core.remote import reading
from flowdrop_tui.core.remote.config import RemoteConfig
from flowdrop_tui.core.remote.postgres.store import PostgresStore
from flowdrop_tui.core.remote.remote_mode import RemoteMode
from flowdrop_tui.tui.app import FlowdropApp
from flowdrop_tui.tui.screens.prune_modal import PruneModal, offer_prune
from flowdrop_tui.tui.widgets.workspace_bar import WorkspaceBar
from tests.flow_bodies import adds_one_a_round, counts_rounds
from tests.remote.machines import WorkerChild, clone, make_origin
from tests.tui.tui_helpers import asked, until

FINISHES = """
import time
from flowdrop_tui import flow

@flow(resumable=True)
def main(run):
    for r in run.rounds(range(30)):
        run.state["r"] = r
        time.sleep(0.2)
"""


@pytest.fixture
def machines(tmp_path: Path, pg_store: PostgresStore) -> Iterator[tuple[Path, Path, Path]]:
    """(a client, worker one, worker two): clones of one origin."""
    origin = make_origin(tmp_path, {"forever": counts_rounds(sleep=0.2), "finishes": FINISHES})
    yield tuple(clone(origin, tmp_path / name) for name in ("client", "w1", "w2"))  # type: ignore[misc]


def status_of(app: FlowdropApp, flow: str) -> tuple[object, int]:
    row = app._main().flows.rows_by_name.get(flow) or {}
    return row.get("status"), int(row.get("round") or 0)  # type: ignore[call-overload]


async def test_the_ui_follows_the_runs_of_two_workers(
    machines: tuple[Path, Path, Path], postgres_url: str, space: str
) -> None:
    """Guards one live view of a team's runs: two runs on two other "machines" appear
    in the client's UI while they run, move on as they save rounds, and end there as
    they end on their workers; the top line names the store."""
    client, w1, w2 = machines
    remote = RemoteConfig(temporal="127.0.0.1:9", postgres=postgres_url, space=space)
    app = FlowdropApp(Layout(client), RemoteMode(Layout(client), remote))
    forever = finishes = None
    try:
        async with app.run_test(size=(120, 36)) as pilot:
            bar = app.screen.query_one(WorkspaceBar)
            assert f"remote: {space} @ 127.0.0.1:" in str(bar.render())
            forever = WorkerChild(w1, postgres_url, space, "forever", worker="w1")
            finishes = WorkerChild(w2, postgres_url, space, "finishes", worker="w2")
            await until(
                pilot,
                lambda: (
                    status_of(app, "forever")[0] == "running"
                    and status_of(app, "finishes")[0] == "running"
                ),
                what="both runs shown running",
            )
            assert "2 running: " in str(bar.render())
            seen = status_of(app, "forever")[1]
            await until(
                pilot, lambda: status_of(app, "forever")[1] > seen + 2, what="forever moving on"
            )
            await until(
                pilot,
                lambda: status_of(app, "finishes")[0] == "completed",
                timeout=60,
                what="finishes shown completed",
            )
            assert status_of(app, "forever")[0] == "running"
            forever.kill()  # its worker's child is gone: not live any more, anywhere
            await until(
                pilot,
                lambda: status_of(app, "forever")[0] not in ("running", "starting"),
                what="forever no longer shown running",
            )
            replica = app.live_replica
            assert replica is not None and replica.problem() is None
        assert app.live_replica is None  # stopped with the app
    finally:
        for child in (forever, finishes):
            if child is not None:
                child.close()


async def test_the_uis_prune_deletes_in_postgres_not_only_here(
    tmp_path: Path, postgres_url: str, space: str, pg_store: PostgresStore
) -> None:
    """Guards the command palette's prune in remote mode: what it deletes goes from
    PostgreSQL (so from every replica), not only from this machine's replica — which
    the next sync would never put back."""
    origin = make_origin(tmp_path, {"quick": adds_one_a_round("n", 1)})
    client, worker = clone(origin, tmp_path / "client"), clone(origin, tmp_path / "w1")
    runs = []
    for _ in range(3):
        child = WorkerChild(worker, postgres_url, space, "quick", ["--fresh"])
        try:
            assert child.wait() == 0
        finally:
            child.close()
        runs.append(child.run_id)
    remote = RemoteConfig(temporal="127.0.0.1:9", postgres=postgres_url, space=space)
    layout = Layout(client)
    reading.synced(layout, remote)
    app = FlowdropApp(layout, RemoteMode(layout, remote))
    async with app.run_test(size=(120, 36)) as pilot:
        offer_prune(app, app.mode, keep=0)
        await until(pilot, lambda: asked(app, PruneModal), what="the dry run")
        assert [row["run"] for row in app.screen.report["delete"]] == runs[:2]
        await pilot.press("y")
        await until(pilot, lambda: sorted(pg_store.run_ids()) == [runs[2]], what="deleted")
        await until(pilot, lambda: not (layout.runs / runs[0]).exists(), what="replica")
    other = Layout(clone(origin, tmp_path / "other"))
    reading.synced(other, remote)
    assert sorted(p.name for p in other.runs.iterdir()) == [runs[2]]
