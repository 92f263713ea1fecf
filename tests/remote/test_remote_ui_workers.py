"""The UI driving runs on two real ``flowdrop-tui worker`` processes (Temporal dev server,
PostgreSQL): enter, escape, p, r and x go through the executor, and the view follows."""

from __future__ import annotations

from pathlib import Path

from flowdrop_tui.core.paths import Layout
from flowdrop_tui.core.remote import config, reading
from flowdrop_tui.core.remote.postgres.store import PostgresStore
from flowdrop_tui.tui.screens.close_run_modal import CloseRunModal
from flowdrop_tui.tui.screens.pick_up_modal import PickUpModal
from tests.remote.cluster import COUNTER, Cluster, make_client
from tests.tui.tui_helpers import RecordingApp, until
from tests.tui.tui_helpers import asked as on_screen

SIZE = (120, 36)
WAIT = 90.0  # seconds for each step: two workers, Temporal and the UI share 2 busy cores


def row(app: RecordingApp, flow: str) -> dict[str, object]:
    return dict(app.main_screen.flows.rows_by_name.get(flow) or {})


async def test_the_ui_runs_and_follows_flows_on_two_workers(
    cluster: Cluster, space: str, postgres_url: str, tmp_path: Path
) -> None:
    """Guards the UI in remote mode end to end: two flows started with enter run on two
    different workers and show running with their rounds moving; p pauses one on its
    worker, r resumes it, x closes it after asking; escape stops the other."""
    first = cluster.start_worker("a", max_runs=1)
    second = cluster.start_worker("b", max_runs=1)
    client = make_client(cluster, space, tmp_path)
    client.add_flow("one", COUNTER)
    client.add_flow("two", COUNTER)
    first.wait_polling()
    second.wait_polling()
    layout = Layout(client.ws)
    remote = config.load(layout)
    assert remote is not None
    reading.synced(layout, remote)  # as `flowdrop-tui` does before the UI opens
    app = RecordingApp(layout)
    app.remote = remote
    store = PostgresStore(postgres_url, space)
    try:
        async with app.run_test(size=SIZE) as pilot:
            main = app.main_screen
            await until(pilot, lambda: main.flows.selected_name == "one", what="the flows")
            await pilot.press("enter")
            await until(pilot, lambda: row(app, "one").get("status") == "running", timeout=WAIT)
            await pilot.press("down")
            await until(pilot, lambda: main.flows.selected_name == "two", what="two selected")
            await pilot.press("enter")
            await until(pilot, lambda: row(app, "two").get("status") == "running", timeout=WAIT)
            holders = {info["worker"] for info in store.live_runs().values()}
            assert holders == {"a", "b"}  # one run on each worker
            seen = int(row(app, "one").get("round") or 0)  # type: ignore[call-overload]
            await until(
                pilot,
                lambda: int(row(app, "one").get("round") or 0) > seen + 1,  # type: ignore[call-overload]
                what="one's rounds moving on",
                timeout=WAIT,
            )
            await pilot.press("p")  # two: paused on its worker
            await until(pilot, lambda: row(app, "two").get("status") == "paused", timeout=WAIT)
            await pilot.press("escape")  # escape never closes a paused run
            # Said from the runs pane ("escape leaves it so"), or, when the pane still
            # showed it live, refused on the way (ALREADY_PAUSED): either way it stays.
            await until(
                pilot,
                lambda: (
                    app.heard("is paused; escape leaves it so")
                    or app.heard("is paused, so it was left as it is")
                ),
                what="kept",
                timeout=WAIT,
            )
            assert row(app, "two").get("status") == "paused"
            await pilot.press("r")
            # The run recorded the branch this clone is on (its worker's worktree is a
            # detached HEAD, given the client's branch): nothing drifted, so r resumes
            # at once, with no preview to answer.
            await until(
                pilot, lambda: app.heard("resumed at round"), what="the resume", timeout=WAIT
            )
            assert not isinstance(app.screen, PickUpModal)
            await until(pilot, lambda: row(app, "two").get("status") == "running", timeout=WAIT)
            # The resumed run's liveness reaches this replica a moment after its
            # `resumed` event: a p pressed in between is told "no live run to pause"
            # (what a person would see, and press again), so press again until asked.
            asked = sum("will pause after round" in said for said in app.said)
            for _ in range(20):
                await pilot.press("p")
                try:
                    await until(
                        pilot,
                        lambda: sum("will pause after round" in said for said in app.said) > asked,
                        what="the second pause asked",
                        timeout=3,
                    )
                    break
                except AssertionError:
                    assert app.heard("has no live run to pause"), app.said
            await until(pilot, lambda: row(app, "two").get("status") == "paused", timeout=WAIT)
            await pilot.press("x")
            await until(
                pilot, lambda: on_screen(app, CloseRunModal), what="the question", timeout=WAIT
            )
            await pilot.press("y")  # the question naming the run, once it is on screen
            await until(pilot, lambda: row(app, "two").get("status") == "cancelled", timeout=WAIT)
            await pilot.press("up")
            await until(pilot, lambda: main.flows.selected_name == "one", what="one selected")
            await pilot.press("escape")
            await until(
                pilot,
                lambda: app.heard("stopping after round"),
                what="the stop asked",
                timeout=WAIT,
            )
            await until(pilot, lambda: row(app, "one").get("status") == "cancelled", timeout=WAIT)
            await until(
                pilot, lambda: store.live_runs() == {}, what="both runs let go", timeout=WAIT
            )
    finally:
        store.close()
