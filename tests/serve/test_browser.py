"""The served UI in a real headless Chromium: the flows with their round counters
and resumability, enter to run, escape twice to stop, and runs that outlive the
tab and the server. Runs are checked through the CLI, not the screen."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from tests.conftest import CLI, wait_for, write_flow

from .browser import chromium
from .serve_helpers import alive, serving

PNG = b"\x89PNG\r\n\x1a\n"
# Set to a path to keep the screenshot (docs/serve.png is made this way).
SCREENSHOT_ENV = "FLOWDROP_SERVE_SCREENSHOT"

COUNTER = """
import time
from flowdrop_tui import flow

@flow(resumable=True, description="Counts; slow once picked up")
def main(run):
    for number in run.rounds():
        run.state["count"] = number
        if number == 3:
            return "three"
        time.sleep(0.01 if number < 3 else 120)
"""

TICKER = """
import time
from flowdrop_tui import flow

@flow(description="Ticks until stopped")
def main(run):
    for number in run.rounds():
        run.state["tick"] = number
        time.sleep(0.2)
"""


def _runs(cli: CLI, flow: str) -> list[dict[str, Any]]:
    runs: list[dict[str, Any]] = cli.json("runs", flow)
    return runs


def _row(screen: str, flow: str) -> str:
    return next((line for line in screen.splitlines() if re.search(rf"\b{flow}\b", line)), "")


def _scratch(workspace: Path, cli: CLI) -> str:
    """counter has run once (3 rounds, resumable); ticker never ran."""
    write_flow(workspace, "counter", COUNTER)
    write_flow(workspace, "ticker", TICKER)
    cli("run", "counter", check=0)
    (first,) = _runs(cli, "counter")
    assert (first["status"], first["last_round"]) == ("completed", 3)
    return str(first["run"])


def test_in_the_browser_a_flow_is_run_and_stopped_with_the_token(
    workspace: Path, cli: CLI, tmp_path: Path
) -> None:
    """Guards against the served UI not being the whole UI (flows, rounds,
    resumability, enter, escape twice), and against the token URL not carrying a
    real browser through to the websocket (or the page answering without it)."""
    first = _scratch(workspace, cli)
    with serving(workspace, "--host", "0.0.0.0") as served, chromium() as browser:
        assert served.token is not None
        browser.open(served.base + "/")
        assert "this address needs the token" in browser.page_text()
        assert browser.screen() == ""  # no terminal: nothing of the app was served
        assert served.ui_processes() == []

        browser.open(f"{served.base}/?token={served.token}")
        assert browser.driver.current_url == served.base + "/"  # the token left the bar
        # The list fills in as each flow is read: wait for both rows to be whole.
        counter_row = re.compile(r"counter\s+completed\s+round 3\s+yes\b")
        ticker_row = re.compile(r"ticker\s+never run\s+no rounds yet\s+no\b")
        browser.wait_for_screen(
            lambda s: (
                counter_row.search(_row(s, "counter")) and ticker_row.search(_row(s, "ticker"))
            )
        )

        # Textual's web driver starts blurred; with the page's focus, the flow list has it.
        browser.focus()
        browser.wait_for_screen(lambda s: s.splitlines()[-1].lstrip().startswith("⏎ Run"))
        browser.press("\ue007")  # enter on counter: picking up is shown first
        browser.wait_for_screen(lambda s: "Pick up counter" in s and "next round   4" in s)
        browser.press("y")
        run = wait_for(
            lambda: next((r for r in _runs(cli, "counter") if r["run"] != first), None), 60
        )
        assert run["picked_up_from"] == first
        assert wait_for(lambda: _runs(cli, "counter")[0]["status"] == "running", 60)
        wait_for(lambda: _runs(cli, "counter")[0]["first_round"] == 4, 60)

        browser.press("\ue00c")  # escape: stop after the round (two minutes long)
        browser.wait_for_screen(lambda s: "escape again to stop now" in s)
        assert _runs(cli, "counter")[0]["status"] == "running"
        browser.press("\ue00c")  # escape again: stop now
        wait_for(lambda: _runs(cli, "counter")[0]["status"] == "cancelled", 60)
        browser.wait_for_screen(lambda s: "cancelled" in _row(s, "counter"))

        png = browser.screenshot()
        assert png.startswith(PNG) and len(png) > 10_000
        (tmp_path / "serve.png").write_bytes(png)
        if os.environ.get(SCREENSHOT_ENV):
            Path(os.environ[SCREENSHOT_ENV]).write_bytes(png)


def test_a_run_started_in_the_browser_outlives_the_tab_and_the_server(
    workspace: Path, cli: CLI
) -> None:
    """Guards against a run started from the browser dying with its tab (textual-serve
    ends the UI process when the websocket closes) or with the server (Ctrl-C), and
    against Ctrl-C leaving a UI process behind."""
    _scratch(workspace, cli)
    with serving(workspace) as served, chromium() as browser:
        browser.open(served.url)
        browser.wait_for_screen(lambda s: "no rounds yet" in _row(s, "ticker"))
        browser.press("\ue015")  # down: ticker
        browser.wait_for_screen(lambda s: "Runs of ticker" in s)
        browser.press("\ue007")  # not resumable: it starts fresh at once
        (run,) = wait_for(lambda: _runs(cli, "ticker"), 60)
        wait_for(lambda: _runs(cli, "ticker")[0]["status"] == "running", 60)
        (ui,) = served.ui_processes()

        browser.close()  # the tab goes; textual-serve ends its UI process
        wait_for(lambda: not alive(ui), 30)
        rounds = _runs(cli, "ticker")[0]["last_round"]
        wait_for(lambda: _runs(cli, "ticker")[0]["last_round"] > rounds + 2, 30)

        code, err = served.interrupt()  # Ctrl-C at the server's terminal
        assert code == 0, err
        assert "Traceback" not in err
        assert served.ui_processes() == []
        rounds = _runs(cli, "ticker")[0]["last_round"]
        wait_for(lambda: _runs(cli, "ticker")[0]["last_round"] > rounds + 2, 30)
        assert _runs(cli, "ticker")[0]["status"] == "running"

    cli("stop", str(run["run"]), "--wait", check=0)
    assert _runs(cli, "ticker")[0]["status"] == "cancelled"


ASKS = """
from flowdrop_tui import flow

@flow(description="Asks before it ships")
def main(run):
    for _ in run.rounds(range(1)):
        answer = run.ask("ship it?", choices=["ship", "hold"])
    return answer
"""


def test_in_the_browser_a_question_is_answered_from_the_inbox(workspace: Path, cli: CLI) -> None:
    """Guards SPEC §21 in the served UI: `i` opens the inbox with the question, enter
    opens it with its choices, and the choice resumes the run to its answer."""
    write_flow(workspace, "asks", ASKS)
    run = str(cli.json("run", "asks", "--detach")["run"])
    wait_for(lambda: cli.json("show", run)["gate"] is not None, 60)
    with serving(workspace) as served, chromium() as browser:
        browser.open(served.base + "/")
        browser.wait_for_screen(lambda s: "asks" in s and "paused" in s)
        browser.focus()
        browser.wait_for_screen(lambda s: s.splitlines()[-1].lstrip().startswith("⏎ Run"))
        browser.press("i")
        browser.wait_for_screen(lambda s: "Inbox: what waits on you" in s and "ship it?" in s)
        browser.press("\ue007")  # enter: the question, its choices as buttons
        browser.wait_for_screen(lambda s: "of asks asks" in s)
        browser.press("\ue007")  # the first choice has the focus
        wait_for(lambda: cli.json("show", run)["status"] == "completed", 60)
    assert cli.json("show", run)["result"] == "ship"
