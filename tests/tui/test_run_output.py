"""The Run pane: how long a run ran, and what it printed (docs/decisions.md, "Listing"
and "What a run printed")."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from flowdrop_tui.core.paths import Layout
from tests.flow_bodies import counts_rounds
from tests.seeded_records import reindex, seed_run
from tests.tui.tui_helpers import RecordingApp, settled, until

SIZE = (120, 36)

LOOP = counts_rounds()

FAILING = """
    from flowdrop_tui import flow

    def deep(n):
        if n == 0:
            raise ValueError("the flow broke on purpose")
        return deep(n - 1)

    @flow(description="prints, then fails")
    def main(run):
        for item in run.rounds(["a", "b"]):
            print("working on", item)
        deep(3)
"""

# Prints a numbered line, then waits for the test to let the next one go: the test
# sees each line arrive while the run is still live.
PRINTER = """
    import os, time
    from flowdrop_tui import flow

    @flow(description="prints on demand")
    def main(run):
        n = 0
        while not os.path.exists("finish"):
            if os.path.exists("next"):
                os.remove("next")
                n += 1
                print(f"line {n}", flush=True)
                if n == 1:
                    print("\x1b[31mred\x1b[0m and a bell\x07", flush=True)
            time.sleep(0.02)
        print("no newline at the end", end="", flush=True)
"""

KILLED = "20260817T010000.000Z-aaaaaa"


def detail_text(app: RecordingApp) -> str:
    """The Run pane's whole text: about, output, then state, sessions and commits."""
    return app.main_screen.detail.plain_text


async def test_an_interrupted_runs_duration_is_fixed_at_its_last_event(
    workspace: Path, flow_writer: Callable[[str, str], Path]
) -> None:
    """Guards against the duration of a killed run growing with the clock (months here)."""
    flow_writer("loop", LOOP)
    seed_run(workspace, KILLED, "loop", last_round=3, outcome=None)  # killed 7 s in
    reindex(workspace)
    app = RecordingApp(Layout(workspace))
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: settled(app), what="the first reads")
        runs = app.main_screen.runs
        assert runs.selected_run is not None and runs.selected_run.status == "interrupted"
        assert str(runs.get_cell(KILLED, "duration")) == "7s"
        runs.tick()  # the clock a live run's duration follows: not this one's
        await pilot.pause()
        assert str(runs.get_cell(KILLED, "duration")) == "7s"
        text = detail_text(app)
        assert "started 2026-08-17 01:00:00\ntime    running 6s · wall 7s" in text
        assert "last event 2026-08-17 01:00:07" in text


async def test_a_failed_run_launched_from_the_ui_shows_its_traceback(
    workspace: Path, flow_writer: Callable[[str, str], Path]
) -> None:
    """Guards against a failed run showing a one-line error, its traceback only in
    output.log. The Run pane now shows what it printed, the traceback to its last line."""
    flow_writer("boom", FAILING)
    app = RecordingApp(Layout(workspace))
    async with app.run_test(size=SIZE) as pilot:
        main = app.main_screen
        await until(pilot, lambda: settled(app), what="the first reads")
        await pilot.press("enter")
        await until(pilot, lambda: main.selected_run is not None, what="the new run selected")
        error = "error ValueError: the flow broke on purpose"  # the one-line error
        await until(pilot, lambda: error in detail_text(app), what="the failure")
        await until(pilot, lambda: "ValueError: the flow broke on purpose\n" in detail_text(app))
        text = detail_text(app)
        assert "Traceback (most recent call last):" in text
        assert 'raise ValueError("the flow broke on purpose")' in text
        assert text.index("working on a") < text.index("working on b") < text.index("Traceback")
        assert main.detail.output[-1] == "ValueError: the flow broke on purpose"
        # The pane is shorter than what it holds: it shows the traceback's last line.
        assert main.detail.max_scroll_y > 0
        await until(pilot, main.detail.output_end_in_view, what="the traceback's end in view")
        assert main.detail.scroll_y > 0


async def test_the_run_pane_follows_what_a_live_run_prints(
    workspace: Path, flow_writer: Callable[[str, str], Path]
) -> None:
    """Guards following: each printed line shows while the run is live, only the newest
    20 stay, escapes never reach the terminal, and an unfinished last line shows once
    the run has ended."""
    flow_writer("printer", PRINTER)
    app = RecordingApp(Layout(workspace))
    async with app.run_test(size=SIZE) as pilot:
        main = app.main_screen
        await until(pilot, lambda: settled(app), what="the first reads")
        await pilot.press("enter")
        await until(pilot, lambda: main.selected_run is not None, what="the new run selected")
        await until(pilot, lambda: "nothing printed yet" in detail_text(app), what="no output")
        for n in range(1, 26):
            (workspace / "next").write_text("")
            await until(pilot, lambda n=n: f"line {n}\n" in detail_text(app) + "\n", what=n)
            if n == 1:  # the colour codes dropped, the bell shown as a replacement character
                await until(pilot, lambda: "red and a bell\ufffd" in detail_text(app), what="esc")
                assert "\x1b" not in detail_text(app) and "\x07" not in detail_text(app)
        output = list(main.detail.output)
        assert output[-1] == "line 25" and len(output) == 20 and "line 5" not in output
        text = detail_text(app)
        assert "output · last 20 lines" in text and f"logs {main.selected_run}" in text
        await until(pilot, main.detail.output_end_in_view, what="following the output")
        main.detail.scroll_home(animate=False, immediate=True)  # the user looks up: it holds
        await pilot.pause()
        (workspace / "next").write_text("")
        await until(pilot, lambda: "line 26" in detail_text(app), what="line 26")
        await pilot.pause(0.2)
        assert main.detail.scroll_y == 0 and not main.detail.output_end_in_view()
        (workspace / "finish").write_text("")
        await until(pilot, lambda: "no newline at the end" in detail_text(app), what="the end")
        assert main.detail.output[-1] == "no newline at the end"
