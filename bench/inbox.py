"""Benchmark (j): the inbox (SPEC §21) with 10 runs and with 10,000.

What is timed: ``flowdrop_tui.core.inbox.items(layout, send=False)`` — the index read,
then each key whose last run did not complete folded — in two workspaces of the same
keys (10), whose newest run of every key failed (so every key has an item), one with
10 runs and one with 10,000 around them. Goal: the cost does not grow with the number
of runs (ratio ≤ 1.2), as for resolving a pick-up (bench/resolve.py builds the
workspaces the same way).

    python bench/inbox.py            # 10 vs 10,000 runs
    python bench/inbox.py --quick    # a smaller, faster run (smoke test)
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import orjson
from resolve import real_runs, workspace

from flowdrop_tui.core import inbox
from flowdrop_tui.core.paths import CYCLE, Layout
from flowdrop_tui.core.records.listing import index

GOAL = 1.2


def fail_newest(layout: Layout) -> int:
    """Make each key's newest run a failed one (its ``ended`` event rewritten)."""
    keys = index.load(layout)["keys"]
    for entry in keys.values():
        path = layout.runs / entry["last_run"] / CYCLE
        lines = path.read_bytes().splitlines(keepends=True)
        for n, line in enumerate(lines):
            event = orjson.loads(line)
            if event["event"] == "ended":
                event.update(outcome="failed", error={"type": "Bench", "message": "red"})
                lines[n] = orjson.dumps(event) + b"\n"
        path.write_bytes(b"".join(lines))
    index.rebuild(layout)
    return len(keys)


def timed(layout: Layout, calls: int) -> float:
    wall = time.perf_counter()
    for _ in range(calls):
        inbox.items(layout, send=False)
    return (time.perf_counter() - wall) / calls


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer runs and calls (smoke)")
    parser.add_argument("--large", type=int, help="runs in the large one (10,000; quick: 1,000)")
    parser.add_argument("--batches", type=int, help="alternating batches (15; quick: 5)")
    parser.add_argument("--calls", type=int, help="items() calls per batch (50; quick: 10)")
    parser.add_argument("--dir", type=Path, help="where to build the workspaces (a temp dir)")
    args = parser.parse_args()
    large = args.large or (1000 if args.quick else 10_000)
    batches = args.batches or (5 if args.quick else 15)
    calls = args.calls or (10 if args.quick else 50)
    base = Path(tempfile.mkdtemp(prefix="flowdrop-bench-", dir=args.dir))
    try:
        templates = real_runs(base)
        sizes = {"small": 10, "large": large}
        layouts = {}
        found: dict[str, int] = {}
        for name, runs in sizes.items():
            workspace(base, name, runs, 10, templates)
            layouts[name] = Layout(base / name)
            fail_newest(layouts[name])
            found[name] = len(inbox.items(layouts[name], send=False))
            assert found[name] >= 1
            timed(layouts[name], calls)  # warm up
        per_call: dict[str, list[float]] = {name: [] for name in sizes}
        ratios = []
        for n in range(batches):
            for name in sorted(layouts, reverse=n % 2 == 1):
                per_call[name].append(timed(layouts[name], calls))
            ratios.append(per_call["large"][-1] / per_call["small"][-1])
    finally:
        shutil.rmtree(base, ignore_errors=True)
    ratio = statistics.median(ratios)
    print(f"inbox: items() with every key's newest run failed (items: {found})")
    for name, runs in sizes.items():
        print(f"  {runs:>6} runs: {statistics.median(per_call[name]) * 1e3:8.2f} ms per call")
    spread = f"{min(ratios):.2f}-{max(ratios):.2f}"
    verdict = "met" if ratio <= GOAL else "NOT met"
    print(f"  ratio {ratio:.2f} (spread {spread}); goal <= {GOAL}: {verdict}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
