"""Lanes in the UI (SPEC §23, "Seeing lanes"): a flow's lanes grouped under it, each
a key the runs panes show; ``L`` lands the selected lane after asking, once, and a
refusal changes nothing. The lanes are made by really running ``run FLOW@N``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from flowdrop_tui.core.lanes import lane_log
from flowdrop_tui.core.paths import Layout
from flowdrop_tui.tui.screens.land_lane_modal import LandLaneModal
from flowdrop_tui.tui.screens.lane_actions import NOT_A_LANE
from tests.conftest import write_flow
from tests.tui.test_keys_do_what_they_say import burst
from tests.tui.tui_helpers import RecordingApp, asked, settled, until

SIZE = (120, 36)
IDENTITY = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@t",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@t",
}
FLOW = """
import os
import subprocess
from pathlib import Path

from flowdrop_tui import flow


@flow(resumable=True, description="writes a file in its lane")
def main(run):
    for n in run.rounds([1]):
        Path("out.txt").write_text(f"round {n}\\n")
        if not os.environ.get("NO_COMMIT"):
            subprocess.run(["git", "add", "out.txt"], check=True)
            subprocess.run(["git", "commit", "-qm", f"lane round {n}"], check=True)
"""


@pytest.fixture
def lanes_ws(workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """``agent`` with lane 1 (one commit) and lane 2 (its tree left dirty), made by
    real runs; the lanes' worktrees under a tmp XDG_DATA_HOME."""
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    for name, value in IDENTITY.items():
        monkeypatch.setenv(name, value)
    write_flow(workspace, "agent", FLOW)
    (workspace / ".gitignore").write_text(".flowdrop/\n")
    subprocess.run(["git", "add", "-A"], cwd=workspace, check=True)
    subprocess.run(["git", "commit", "-qm", "the flow"], cwd=workspace, check=True)
    for lane, extra in (("1", {}), ("2", {"NO_COMMIT": "1"})):
        subprocess.run(
            [sys.executable, "-m", "flowdrop_tui", "run", f"agent@{lane}"],
            cwd=workspace,
            env={**os.environ, **extra},
            check=True,
            capture_output=True,
        )
    return workspace


def head(ws: Path, ref: str = "main") -> str:
    return subprocess.run(
        ["git", "rev-parse", ref], cwd=ws, check=True, capture_output=True, text=True
    ).stdout.strip()


def lane_shown(app: RecordingApp, key: str) -> bool:
    return settled(app) and bool(app.main_screen.flows.lane_facts.get(key))


async def select(app: RecordingApp, pilot: object, key: str) -> None:
    main = app.main_screen
    names = list(main.flows.rows_by_name)
    main.flows.move_cursor(row=names.index(key))
    await until(pilot, lambda: main.runs.key == key and settled(app), what=f"{key}'s runs")


async def test_lanes_are_grouped_under_their_flow_and_select_as_keys(lanes_ws: Path) -> None:
    """Guards the lane rows: after their flow, shown as @N with their git facts, and a
    lane selected shows its own runs (a lane is a key); L and d are in force there."""
    app = RecordingApp(Layout(lanes_ws))
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: lane_shown(app, "agent@2"), what="the lanes' facts")
        main = app.main_screen
        assert list(main.flows.rows_by_name) == ["agent", "agent@1", "agent@2"]
        cells = [main.flows.get_row(key)[0].plain for key in ("agent@1", "agent@2")]
        assert cells == ["  @1", "  @2"]
        about = main.flows.get_row("agent@1")[-1].plain
        assert about.startswith("clean · +1/-") and about.endswith("/-0"), about
        assert "dirty" in main.flows.get_row("agent@2")[-1].plain
        assert not main.check_action("land_lane", ())
        await select(app, pilot, "agent@1")
        # the key is set before its runs are read (off the UI thread): wait for them
        await until(pilot, lambda: len(main.runs.runs) == 1, what="agent@1's one run")
        assert all(info.key == "agent@1" for info in main.runs.runs.values())
        assert main.check_action("land_lane", ()) and main.check_action("show_lane_diff", ())


async def test_L_on_a_flow_says_what_it_does(lanes_ws: Path) -> None:
    """Guards L off a lane: one line saying what L does and how lanes start."""
    app = RecordingApp(Layout(lanes_ws))
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: lane_shown(app, "agent@1"), what="the lanes")
        await select(app, pilot, "agent")
        await pilot.press("L")
        await until(pilot, lambda: app.heard(NOT_A_LANE), what="L's hint")
        assert "--lanes 3" in NOT_A_LANE and "\n" not in NOT_A_LANE
        assert not isinstance(app.screen, LandLaneModal)


async def test_escape_on_the_question_lands_nothing(lanes_ws: Path) -> None:
    """Guards L's question: it names the lane, the branch, where and how; escape (three
    times, hurried) leaves the target as it was and nothing is recorded."""
    before = head(lanes_ws)
    app = RecordingApp(Layout(lanes_ws))
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: lane_shown(app, "agent@1"), what="the lanes")
        await select(app, pilot, "agent@1")
        await pilot.press("L")
        modal = await until(pilot, lambda: asked(app, LandLaneModal), what="the question")
        assert modal.title_text == "Land lane agent@1 into main?"
        shown = str(modal.question)
        assert "flowdrop/agent/1" in shown and "merge" in shown
        await pilot.press("escape", "escape", "escape")
        await until(pilot, lambda: not isinstance(app.screen, LandLaneModal), what="closed")
        await until(pilot, lambda: settled(app), what="quiet")
    assert head(lanes_ws) == before
    assert lane_log.last(Layout(lanes_ws), "agent@1", "landed") is None


async def test_L_asks_then_lands_once_on_a_hurried_enter_enter(lanes_ws: Path) -> None:
    """Guards landing from the UI: enter on the question lands the lane into main (its
    commit reachable from main), once; the second enter, reaching the question kept up
    while it lands, neither lands again nor starts (or asks to pick up) the lane."""
    layout = Layout(lanes_ws)
    lane_commit = head(lanes_ws, "flowdrop/agent/1")
    app = RecordingApp(layout)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: lane_shown(app, "agent@1"), what="the lanes")
        await select(app, pilot, "agent@1")
        await pilot.press("L")
        await until(pilot, lambda: asked(app, LandLaneModal), what="the question")
        await burst(pilot, "enter", "enter")  # both queued before the first is handled
        await until(pilot, lambda: app.heard("landed agent@1 into main"), what="landed")
        await until(pilot, lambda: settled(app), what="quiet")
        assert app.screen is app.main_screen  # the second enter reached the question
        assert len(app.main_screen.runs.runs) == 1  # no run started behind it
    subprocess.run(
        ["git", "merge-base", "--is-ancestor", lane_commit, "main"], cwd=lanes_ws, check=True
    )
    assert len([e for e in lane_log.events(layout, "agent@1") if e.get("event") == "landed"]) == 1


async def test_L_on_a_dirty_lane_is_refused_and_changes_nothing(lanes_ws: Path) -> None:
    """Guards the refusal: its one line shown, the target and the lane as they were."""
    before = head(lanes_ws)
    app = RecordingApp(Layout(lanes_ws))
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: lane_shown(app, "agent@2"), what="the lanes")
        await select(app, pilot, "agent@2")
        await pilot.press("L")
        await until(pilot, lambda: asked(app, LandLaneModal), what="the question")
        await pilot.press("y")
        await until(pilot, lambda: any("uncommitted" in s for s in app.said), what="refused")
    assert head(lanes_ws) == before
    assert lane_log.last(Layout(lanes_ws), "agent@2", "landed") is None


async def test_at_80_columns_L_takes_ns_place_in_the_footer_and_n_still_works(
    lanes_ws: Path,
) -> None:
    """Guards the narrow footer: on a lane it shows L (not n, and d stays in help) so it
    still fits 80 columns; n still starts the lane fresh (asked first); on a flow's
    row the footer is as before."""
    from flowdrop_tui.tui.screens.fresh_run_modal import FreshRunModal

    app = RecordingApp(Layout(lanes_ws))
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: lane_shown(app, "agent@1"), what="the lanes")
        main = app.main_screen

        def footer() -> set[str]:
            shown = main.active_bindings.values()
            return {b.binding.action for b in shown if b.binding.show and b.enabled}

        await select(app, pilot, "agent")
        assert "fresh_run" in footer() and "land_lane" not in footer()
        await select(app, pilot, "agent@1")
        await until(pilot, lambda: "land_lane" in footer(), what="L in the footer")
        assert "fresh_run" not in footer() and "show_lane_diff" not in footer()
        await pilot.press("n")
        await until(pilot, lambda: asked(app, FreshRunModal), what="n's question")
        await pilot.press("n")
        await until(pilot, lambda: app.screen is main, what="kept as it was")
