"""``d`` on a run: what its round changed (SPEC §20), rounds stepped with ``[`` ``]``."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from textual.widgets import Static

from flowdrop_tui.core.paths import Layout
from flowdrop_tui.core.records.run_record.run_fold import list_run_ids
from flowdrop_tui.tui.screens.diff_screen import DiffScreen
from tests.conftest import CLI
from tests.tui.tui_helpers import RecordingApp, until

COMMITS = """
import subprocess
from flowdrop_tui import flow

@flow(resumable=True, description="a file a round, committed")
def main(run):
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t"]
    for n in run.rounds(range(3)):
        run.state["n"] = n
        name = f"round{run.round}.txt"
        (run.workspace / name).write_text(f"written in round {run.round}\\n")
        subprocess.run([*git, "add", name], cwd=run.workspace, check=True)
        subprocess.run([*git, "commit", "-qm", name], cwd=run.workspace, check=True)
"""

COUNTS = """
from flowdrop_tui import flow

@flow(resumable=True)
def main(run):
    for n in run.rounds(range(1)):
        run.state["n"] = run.state.get("n", 0) + 1
"""


def shown(app: RecordingApp) -> str:
    screen = app.screen
    assert isinstance(screen, DiffScreen)
    head = screen.query_one("#diff-head", Static).render()
    patch = screen.query_one("#diff-patch", Static).render()
    return f"{head}\n{patch}"


async def test_d_shows_the_last_rounds_diff_and_the_brackets_step_rounds(
    layout: Layout, flow_writer: Callable[[str, str], Path], cli: CLI
) -> None:
    (layout.workspace / ".gitignore").write_text("flows/\n.gitignore\n")
    flow_writer("commits", COMMITS)
    cli("run", "commits", check=0)
    [run_id] = list_run_ids(layout)
    app = RecordingApp(layout)
    async with app.run_test(size=(80, 24)) as pilot:
        main = app.main_screen
        await until(pilot, lambda: main.selected_run == run_id, what="the run listed")
        await pilot.press("d")
        await until(pilot, lambda: isinstance(app.screen, DiffScreen), what="the diff screen")
        await until(pilot, lambda: "round3.txt" in shown(app), what="the last round's diff")
        assert "round 3 of 1–3" in shown(app)
        assert "+written in round 3" in shown(app)
        await pilot.press("left_square_bracket")
        await until(pilot, lambda: "round 2 of 1–3" in shown(app), what="round 2")
        assert "round2.txt" in shown(app) and "round3.txt" not in shown(app)
        await pilot.press("left")
        await until(pilot, lambda: "round 1 of 1–3" in shown(app), what="round 1")
        await pilot.press("left_square_bracket")
        await until(pilot, lambda: app.heard("round 1 is the run's first"), what="the first")
        await pilot.press("right_square_bracket")
        await until(pilot, lambda: "round 2 of 1–3" in shown(app), what="round 2 again")
        await pilot.press("escape")
        await until(pilot, lambda: app.screen is main, what="back to the main screen")
        # the key is listed where keys are: help and the command palette read the bindings
        assert any(key == "d" and words == "Diff" for key, words, _ in app.key_help())


async def test_d_outside_git_says_why_and_without_a_run_says_so(
    tmp_path: Path, flow_writer: Callable[[str, str], Path]
) -> None:
    plain = Layout(tmp_path / "plain")
    (plain.workspace / "flows" / "once").mkdir(parents=True)
    (plain.workspace / "flows" / "once" / "flow.py").write_text(
        "from flowdrop_tui import flow\n\n@flow\ndef main(run):\n"
        "    for n in run.rounds(range(2)):\n        run.state['n'] = n\n"
    )
    CLI(plain.workspace)("run", "once", check=0)
    [run_id] = list_run_ids(plain)
    (plain.workspace / "flows" / "zzz").mkdir()
    (plain.workspace / "flows" / "zzz" / "flow.py").write_text(
        "from flowdrop_tui import flow\n\n@flow\ndef main(run):\n    pass\n"
    )
    app = RecordingApp(plain)
    async with app.run_test(size=(80, 24)) as pilot:
        main = app.main_screen
        await until(pilot, lambda: main.selected_run == run_id, what="the run listed")
        await pilot.press("d")
        await until(
            pilot,
            lambda: isinstance(app.screen, DiffScreen) and "not a git repository" in shown(app),
            what="the reason",
        )
        await pilot.press("escape")
        await until(pilot, lambda: app.screen is main, what="closed")
        await until(pilot, lambda: "zzz" in main.flows.rows_by_name, what="the other flow")
        main.flows.focus()
        await pilot.press("j")
        await until(pilot, lambda: main.flows.selected_name == "zzz", what="a flow with no run")
        await pilot.press("d")
        await until(pilot, lambda: app.heard("no run selected"), what="the refusal")
        assert app.screen is main


async def test_s_in_the_diff_screen_shows_the_state_changes_beside_the_rounds_files(
    layout: Layout, flow_writer: Callable[[str, str], Path], cli: CLI
) -> None:
    """Issue 35: the state diff was only in the run pane; ``s`` in ``d``'s screen shows
    what the run's state changed against the run it was picked up from, and back."""
    flow_writer("counts", COUNTS)
    cli("run", "counts", check=0)
    first = list_run_ids(layout)[-1]
    cli("run", "counts", check=0)  # picks up: n goes 1 → 2
    run_id = list_run_ids(layout)[-1]
    app = RecordingApp(layout)
    async with app.run_test(size=(80, 24)) as pilot:
        main = app.main_screen
        await until(pilot, lambda: main.selected_run == run_id, what="the run listed")
        await pilot.press("d")
        await until(pilot, lambda: isinstance(app.screen, DiffScreen), what="the diff screen")
        await until(pilot, lambda: "s state changes" in shown(app), what="the round's diff")
        await pilot.press("s")
        await until(pilot, lambda: "~ n: 1 → 2" in shown(app), what="the state's changes")
        assert f"against run {first} (picked up from it): 1 changed" in shown(app)
        await pilot.press("s")
        await until(pilot, lambda: "round 2 of 2" in shown(app), what="the round again")


WRITES = """
from pathlib import Path
from flowdrop_tui import flow
from flowdrop_tui.core.sessions import Reply, register


class Writer:  # a plug-in backend that reports usage: an agent session (SPEC §20)
    name = "writer"

    def run(self, session, prompt, options):
        session.open()
        Path(session.workspace, prompt).write_text(f"{prompt} written\\n")
        return Reply(exit_code=0, text="ok", usage={"input": 1, "output": 1})


register(Writer())


@flow()
def main(run):
    for n in run.rounds(range(3)):
        run.session("writer", f"notes{run.round}.txt")
"""


async def test_d_shows_what_a_round_that_did_not_commit_changed(
    layout: Layout, flow_writer: Callable[[str, str], Path], cli: CLI
) -> None:
    """An agent round that commits nothing: `[` to round 2 shows the file round 2 wrote
    (its snapshots), not nothing and not the other rounds' files."""
    flow_writer("writes", WRITES)
    cli("run", "writes", check=0)
    [run_id] = list_run_ids(layout)
    app = RecordingApp(layout)
    async with app.run_test(size=(80, 24)) as pilot:
        main = app.main_screen
        await until(pilot, lambda: main.selected_run == run_id, what="the run listed")
        await pilot.press("d")
        await until(pilot, lambda: "round 3 of 1–3" in shown(app), what="the last round")
        assert "notes3.txt" in shown(app) and "+notes3.txt written" in shown(app)
        await pilot.press("left_square_bracket")
        await until(pilot, lambda: "round 2 of 1–3" in shown(app), what="round 2")
        assert "notes2.txt" in shown(app) and "+notes2.txt written" in shown(app)
        assert "notes3.txt" not in shown(app) and "changed nothing" not in shown(app)
