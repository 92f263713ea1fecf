"""The real ``flowdrop-tui`` in a real terminal (tmux) at 80×24, keys in bursts (issue
26): the events pane shows whole events with their rounds; ``r`` on a run out of
budget asks for the new limit where the refusal is, and ``4⏎`` typed at once resumes
it under ``--max-rounds 4``; ``y`` copies the run's id."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from flowdrop_tui.core.paths import Layout
from flowdrop_tui.core.records.run_record.run_fold import load_run
from flowdrop_tui.core.records.run_record.run_info import Status
from tests.conftest import CLI, events, wait_for
from tests.tui.test_tmux import Tmux, open_ui

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")

CAPPED = """
    from flowdrop_tui import flow

    @flow(resumable=True, budget={"rounds": 2}, description="two rounds a chain")
    def main(run):
        for round in run.rounds():
            run.state["n"] = round
            run.log("a round of the capped flow that says quite a lot of words", n=round)
"""


@pytest.fixture
def terminal(tmp_path: Path) -> Iterator[Tmux]:
    session = Tmux(tmp_path / "tmux.sock")
    yield session
    session.close()


def test_at_80x24_r_raises_a_spent_budget_and_the_events_read_whole(
    workspace: Path, flow_writer: Callable[[str, str], Path], cli: CLI, terminal: Tmux
) -> None:
    flow_writer("capped", CAPPED)
    cli("run", "capped", check=0)
    run_id = str(cli.json("runs")[0]["run"])
    layout = Layout(workspace)
    assert load_run(layout, run_id).status == Status.PAUSED
    open_ui(terminal, workspace, (80, 24))
    wait_for(lambda: "Runs of capped" in terminal.screen() and run_id in terminal.screen(), 60)
    wait_for(lambda: "paused after round 2" in terminal.screen(), 60)
    screen = terminal.screen()
    assert "round_ended capped round 2" in screen  # the round's number, in the pane
    # whole words, wrapped, not cut: "rounds budget reached (2 of 2 used)"
    assert "budget_reached rounds" in screen and "budget reached (2 of 2 used)" in screen
    terminal.keys("r")
    # At the top, compact (toasts land at the bottom): its title on the second line.
    wait_for(lambda: "Raise the rounds budget of" in terminal.screen().splitlines()[1], 60)
    screen = terminal.screen()
    assert "2 used of 2; out of budget" in screen
    terminal.keys("4", "Enter")  # … the limit prefilled and selected: 4⏎ in one burst
    wait_for(lambda: load_run(layout, run_id).round == 4, 60)
    wait_for(lambda: load_run(layout, run_id).status == Status.PAUSED, 60)
    resumed = [ev for ev in events(workspace, run_id) if ev["event"] == "resumed"]
    assert [ev["budget"]["overrides"] for ev in resumed] == [{"rounds": 4}]
    wait_for(lambda: "round_ended capped round 4" in terminal.screen(), 60)
    terminal.keys("y")
    wait_for(lambda: "copied run id" in terminal.screen(), 30)
