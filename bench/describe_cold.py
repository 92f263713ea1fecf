"""Listing 50 flows from a cold cache against listing one (SPEC §13;
docs/decisions.md, "Speed"): goal ≤ 2.

Each sample is ``flowdrop-tui flows --json`` as a user runs it, in a workspace whose
describe cache (``.flowdrop/cache``) was just removed, so every flow is loaded in a
child process again. The two workspaces alternate which goes first; the ratio is
the median of per-pair ratios. Beside it, the CPU time the listing and every process
under it spent (user + system), as the same ratio: on a machine other work keeps
busy the wall clock measures the queue, the CPU time what the listing costs.
Usage: ``python bench/describe_cold.py [--rounds N]``.
"""

from __future__ import annotations

import argparse
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

GOAL = 2.0
FLOW = """
    from flowdrop_tui import flow

    @flow(resumable={resumable}, description="Benchmark flow number {n}")
    def main(run):
        for round in run.rounds(range(3)):
            run.state["last"] = round
"""


def make(path: Path, flows: int) -> Path:
    for n in range(flows):
        folder = path / "flows" / f"flow_{n:02d}"
        folder.mkdir(parents=True)
        (folder / "flow.py").write_text(textwrap.dedent(FLOW.format(n=n, resumable=n % 2 == 0)))
    return path


def cold_listing(workspace: Path) -> tuple[float, float]:
    """Wall seconds and CPU seconds (the command and all it waited for)."""
    shutil.rmtree(workspace / ".flowdrop" / "cache", ignore_errors=True)
    command = [sys.executable, "-m", "flowdrop_tui", "--workspace", str(workspace), "flows"]
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    began = time.perf_counter()
    done = subprocess.run([*command, "--json"], capture_output=True, check=True)
    seconds = time.perf_counter() - began
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime - used.ru_utime + after.ru_stime - used.ru_stime
    assert b'"error": null' in done.stdout or b'"error":null' in done.stdout
    return seconds, cpu


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=11)
    parser.add_argument("--flows", type=int, default=50)
    parser.add_argument("--quick", action="store_true", help="a smoke run: 3 rounds")
    args = parser.parse_args()
    rounds = 3 if args.quick else args.rounds
    with tempfile.TemporaryDirectory() as scratch:
        many = make(Path(scratch) / "many", args.flows)
        one = make(Path(scratch) / "one", 1)
        cold_listing(many), cold_listing(one)  # warm the OS's caches of Python itself
        ratios, times_many, times_one, cpu_ratios = [], [], [], []
        for n in range(rounds):
            if n % 2:
                b, a = cold_listing(one), cold_listing(many)
            else:
                a, b = cold_listing(many), cold_listing(one)
            times_many.append(a[0])
            times_one.append(b[0])
            ratios.append(a[0] / b[0])
            cpu_ratios.append(a[1] / b[1])
    value = statistics.median(ratios)
    print(f"{args.flows} flows cold: median {statistics.median(times_many) * 1000:.0f} ms")
    print(f"1 flow cold:   median {statistics.median(times_one) * 1000:.0f} ms")
    print(
        f"CPU time ratio {statistics.median(cpu_ratios):.3f} "
        f"(spread {min(cpu_ratios):.2f}–{max(cpu_ratios):.2f})"
    )
    ok = value <= GOAL
    print(
        f"ratio {value:.3f} (spread {min(ratios):.2f}–{max(ratios):.2f}); goal ≤ {GOAL}: "
        f"{'met' if ok else 'NOT met'}"
    )
    return 0 if ok or args.quick else 1


if __name__ == "__main__":
    raise SystemExit(main())
