"""`runs` answers with its newest page in the same time whatever the number of runs
(SPEC §13; docs/decisions.md, "Speed"), measured as ratios in one run:

(a) ``runs FLOW`` for a flow with 10,000 runs against one with 50, both in one
    workspace of 10,050 runs;                                        goal ≤ 1.2
(b) ``runs`` (all flows) in a workspace of 10,050 runs against one of 50;
                                                                     goal ≤ 1.2

The goal is read on the command as a user runs it (``flowdrop-tui runs … --json``,
a process each, Python's start-up included). The core call behind it
(``views.run_page``, in this process, where nothing dilutes the difference) is
printed too, for information: ``runs FLOW`` costs the page there as well, while
``runs`` of every flow lists the runs folder (so that a folder no flow's run
list names, a record made by hand or damaged, is still shown), which is the
difference (b) shows in-process.
Usage: ``python bench/runs_page.py [--rounds N] [--big 10000]``.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from ui_workspace import _record, _run_id  # noqa: E402

from flowdrop_tui.core import views  # noqa: E402
from flowdrop_tui.core.paths import Layout  # noqa: E402
from flowdrop_tui.core.records.listing import index  # noqa: E402

GOAL = 1.2


def make(path: Path, big: int, small: int) -> Layout:
    """``big`` runs of flow ``big`` and ``small`` of ``small``, interleaved in time."""
    layout = Layout(path)
    layout.ensure()
    every = max(1, big // max(small, 1))
    last = {"big": (None, 1), "small": (None, 1)}
    made_small = 0
    for n in range(big + small):
        key = "small" if made_small < small and n % (every + 1) == every else "big"
        made_small += key == "small"
        source, first = last[key]
        run_id = _run_id(n)
        _record(layout.runs, run_id, key, first, source)
        last[key] = (run_id, first + 3)
    index.rebuild(layout)  # writes the index and each key's run list from the records
    return layout


def timed(call: Callable[[], object], rounds: int) -> list[float]:
    times = []
    for _ in range(rounds):
        began = time.perf_counter()
        call()
        times.append(time.perf_counter() - began)
    return times


def ratio(slow: Callable[[], object], fast: Callable[[], object], rounds: int) -> float:
    """Median of per-batch ratios, the two sides alternating which goes first."""
    ratios = []
    for batch in range(rounds):
        if batch % 2:
            b = statistics.median(timed(fast, 3))
            a = statistics.median(timed(slow, 3))
        else:
            a = statistics.median(timed(slow, 3))
            b = statistics.median(timed(fast, 3))
        ratios.append(a / b)
    return statistics.median(ratios)


def cli(workspace: Path, *args: str) -> Callable[[], object]:
    command = [sys.executable, "-m", "flowdrop_tui", "--workspace", str(workspace), "runs"]
    return lambda: subprocess.run([*command, *args, "--json"], capture_output=True, check=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--big", type=int, default=10_000)
    parser.add_argument("--quick", action="store_true", help="a smoke run: 2,000 runs")
    args = parser.parse_args()
    big = 2_000 if args.quick else args.big
    rounds = 3 if args.quick else args.rounds
    with tempfile.TemporaryDirectory() as scratch:
        mixed = make(Path(scratch) / "mixed", big, 50)
        few = make(Path(scratch) / "few", 0, 50)
        results = {
            "(a) runs FLOW, core": ratio(
                lambda: views.run_page(mixed, "big"), lambda: views.run_page(mixed, "small"), rounds
            ),
            "(a) runs FLOW, command": ratio(
                cli(mixed.workspace, "big"), cli(mixed.workspace, "small"), rounds
            ),
            "(b) runs, core": ratio(
                lambda: views.run_page(mixed), lambda: views.run_page(few), rounds
            ),
            "(b) runs, command": ratio(cli(mixed.workspace), cli(few.workspace), rounds),
        }
    met = True
    for name, value in results.items():
        if name.endswith("core"):
            print(f"{name:<26} ratio {value:.3f}  (for information)")
            continue
        ok = value <= GOAL
        met = met and ok
        print(f"{name:<26} ratio {value:.3f}  (goal ≤ {GOAL}: {'met' if ok else 'NOT met'})")
    print(f"{big:,} runs against 50")
    return 0 if met or args.quick else 1


if __name__ == "__main__":
    raise SystemExit(main())
