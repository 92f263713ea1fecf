"""(k) ``q`` on a cold workspace: how long the UI takes to quit while its background
reads still run (issue 28; goal: within 1 s).

The workspace is ``ui_workspace.py``'s (50 flows, 100,000 runs) with its ledger
(``.flowdrop/cache/runs.json``) deleted, as after an upgrade or a copied workspace:
the UI's size count (a niced child, ``python -m flowdrop_tui.core.records.listing.ledger``)
then reads every run. The UI opens in tmux at 120x40; once the flow list is painted
and the size count's child is running, ``q`` is sent, and the time to the UI's exit
is measured, ``--rounds`` times, the ledger deleted before each. It also checks that
no size-count child is left behind and how much of the ledger each open kept.
Usage: ``python bench/quit_cold.py [--runs 100000] [--rounds 5]``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from ui_workspace import make  # noqa: E402

GOAL = 1.0  # seconds
TMUX = ["tmux", "-L", f"flowdrop-quit-{os.getpid()}"]
COUNT = "flowdrop_tui.core.records.listing.ledger"


def counting(workspace: Path) -> list[int]:
    """The pids of size-count children reading ``workspace``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if COUNT.encode() in argv and str(workspace).encode() in argv:
            found.append(int(entry.name))
    return found


def wait_for(what: str, check: object, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting for {what}")
        time.sleep(0.02)


def pane(name: str) -> str:
    done = subprocess.run([*TMUX, "capture-pane", "-p", "-t", name], capture_output=True)
    return done.stdout.decode(errors="replace")


def alive(name: str) -> bool:
    done = subprocess.run([*TMUX, "has-session", "-t", name], capture_output=True)
    return done.returncode == 0


BARE = """
from textual.app import App
from textual.widgets import DataTable

class Bare(App):
    BINDINGS = [("q", "quit", "Quit")]

    def compose(self):
        yield DataTable()

    def on_mount(self):
        table = self.query_one(DataTable)
        table.add_columns("flow", "round")
        for n in range(50):
            table.add_row(f"flow_{n:02d}", str(n))

Bare().run()
"""


def one_quit(workspace: Path, n: int, bare: bool = False, warm: bool = False) -> tuple[float, int]:
    """Seconds from ``q`` to the app's exit (ours, or a bare Textual app's: the floor);
    runs the ledger held after it."""
    ledger = workspace / ".flowdrop" / "cache" / "runs.json"
    if not warm:
        ledger.unlink(missing_ok=True)
    name = f"quit-{n}-{bare}"
    app = ["-c", BARE] if bare else ["-m", "flowdrop_tui"]
    command = subprocess.list2cmdline([sys.executable, *app])
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "TMUX")}
    where = ["-x", "120", "-y", "40", "-c", str(workspace)]
    subprocess.run(
        [*TMUX, "new-session", "-d", "-s", name, *where, command],
        check=True,
        env={**env, "TERM": "xterm-256color"},
    )
    try:
        wait_for("the flow list", lambda: "flow_0" in pane(name))
        if not bare and not warm:
            wait_for("the size count", lambda: bool(counting(workspace)))
        time.sleep(0.5)  # well into the count
        sent = time.monotonic()
        subprocess.run([*TMUX, "send-keys", "-t", name, "q"], check=True)
        wait_for("the exit", lambda: not alive(name), timeout=300)
        took = time.monotonic() - sent
    finally:
        subprocess.run([*TMUX, "kill-session", "-t", name], capture_output=True)
    wait_for("no size count left", lambda: not counting(workspace), timeout=10)
    try:
        kept = len(orjson.loads(ledger.read_bytes())["runs"])
    except (OSError, orjson.JSONDecodeError, KeyError):
        kept = 0
    return took, kept


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=100_000, help="runs in the workspace")
    parser.add_argument("--rounds", type=int, default=5, help="opens and quits measured")
    parser.add_argument("--warm", action="store_true", help="keep the ledger (a warm open)")
    parser.add_argument("--dir", type=Path, default=None, help="where to build the workspace")
    args = parser.parse_args()
    base = args.dir or Path(tempfile.gettempdir()) / f"flowdrop-bench-{args.runs}"
    workspace = make(base, runs=args.runs).workspace
    subprocess.run([*TMUX, "new-session", "-d", "-s", "keep", "sleep 86400"], check=True)
    try:
        results, floors = [], []
        for n in range(args.rounds):  # alternating, so load falls on both alike
            results.append(one_quit(workspace, n, warm=args.warm))
            floors.append(one_quit(workspace, n, bare=True)[0])
    finally:
        subprocess.run([*TMUX, "kill-server"], capture_output=True)
    times = [took for took, _ in results]
    median = statistics.median(times)
    print(
        f"runs: {args.runs}, cold ledger each open; q to exit (s): "
        + ", ".join(f"{t:.2f}" for t in times)
    )
    print("a bare Textual table app, q to exit (s): " + ", ".join(f"{t:.2f}" for t in floors))
    print("runs the ledger kept after each quit: " + ", ".join(str(k) for _, k in results))
    print(f"median {median:.2f} s (bare: {statistics.median(floors):.2f} s)")
    print(f"goal <= {GOAL:g} s: {'met' if median <= GOAL else 'NOT met'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
