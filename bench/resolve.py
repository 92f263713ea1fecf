"""Benchmark (b): resolving what ``run FLOW`` picks up, with 10 runs and with 10,000.

What is timed: ``flowdrop_tui.core.run.start_plan.plan(layout, key, resumable=True)`` for a
key whose thread has a latest run — the index lookup, reading that run's record
and its ``state.json``, and seeding the new run's state from it. Goal (SPEC §13;
docs/decisions.md, "Speed"): the cost does not grow with the number of runs, ratio ≤ 1.2.

The workspaces are made realistically and fast: a few real runs of two bench
flows (one calls the other) through the real CLI give template records; each
workspace is then filled with clones of them under new run ids — spread over
many keys, each key a chain of runs picking up from the one before — written
with the engine's own ``EventLog`` line format, ``encode`` and ``write_atomic``,
and indexed with ``index.rebuild``. Both workspaces end with the same newest run
of the timed key, so the only difference between them is how many runs surround
it. Calls are timed in batches, alternating between the workspaces; the ratio
is the median of the per-pair ratios.

    python bench/resolve.py            # 10 vs 10,000 runs
    python bench/resolve.py --quick    # a smaller, faster run (smoke test)
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from flowdrop_tui.core.files.atomic import write_atomic
from flowdrop_tui.core.paths import CYCLE, OUTPUT, SESSIONS, STATE, Layout, new_run_id
from flowdrop_tui.core.records.flow_state.state import encode, read_states
from flowdrop_tui.core.records.listing import index
from flowdrop_tui.core.records.run_record.run_fold import list_run_ids
from flowdrop_tui.core.run.start_plan import plan

GOAL = 1.2
TARGET = "flow-00"  # the timed key

FLOWS = {
    "loop": """
        from flowdrop_tui import flow

        @flow(resumable=True, description="bench: three quick rounds")
        def main(run, target="."):
            run.state.setdefault("since", run.run_id)
            for round in run.rounds(range(3)):
                run.state["count"] = run.state.get("count", 0) + 1
                run.state["done"] = [*run.state.get("done", []), f"item-{round}"]
                run.log("counted", count=run.state["count"])
            return run.state["count"]
        """,
    "outer": """
        from flowdrop_tui import flow

        @flow(resumable=True, description="bench: calls loop")
        def main(run):
            for round in run.rounds(range(2)):
                run.state["seen"] = run.call("loop", target=f"pass {round}")
            return "done"
        """,
}


@dataclass
class Template:
    """A real run's record, to be cloned under other ids and keys."""

    key: str
    events: list[dict[str, Any]]
    states: dict[str, Any]
    output: bytes


def git(folder: Path, *args: str) -> None:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "bench",
        "GIT_AUTHOR_EMAIL": "bench@example.invalid",
        "GIT_COMMITTER_NAME": "bench",
        "GIT_COMMITTER_EMAIL": "bench@example.invalid",
    }
    subprocess.run(["git", *args], cwd=folder, check=True, env=env, capture_output=True)


def real_runs(base: Path) -> list[Template]:
    """Run the bench flows through the real CLI; their records are the templates."""
    ws = base / "template"
    for name, code in FLOWS.items():
        (ws / "flows" / name).mkdir(parents=True)
        (ws / "flows" / name / "flow.py").write_text(textwrap.dedent(code).lstrip())
    git(ws, "init", "-q")
    git(ws, "add", "-A")
    git(ws, "commit", "-q", "-m", "bench flows")
    for name in ("loop", "loop", "outer"):  # the second loop run picks up from the first
        subprocess.run(
            [sys.executable, "-m", "flowdrop_tui", "run", name, "--workspace", str(ws)],
            check=True,
            capture_output=True,
        )
    runs = Layout(ws).runs
    templates = []
    for run_id in list_run_ids(Layout(ws)):
        events = [orjson.loads(line) for line in (runs / run_id / CYCLE).read_bytes().splitlines()]
        templates.append(
            Template(
                key=events[0]["key"],
                events=events,
                states=read_states(runs / run_id / STATE),
                output=(runs / run_id / OUTPUT).read_bytes(),
            )
        )
    assert [t.key for t in templates] == ["loop", "loop", "outer"], templates
    return templates


def clone(
    runs: Path, template: Template, run_id: str, key: str, source: str | None, at: float
) -> None:
    """Write ``template`` as run ``run_id`` of ``key``, picked up from ``source``."""
    folder = runs / run_id
    folder.mkdir()
    (folder / SESSIONS).mkdir()
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(at))
    lines = []
    for n, event in enumerate(template.events):
        event = dict(event)
        # Same shape as EventLog.append: "t" with milliseconds, one line per event.
        event["t"] = f"{stamp}.{(int(at * 1000) + n) % 1000:03d}Z"
        if event.get("key") == template.key:
            event["key"] = key
        if event["event"] == "created":
            event.update(
                run=run_id,
                flow=f"flows/{key}",
                source=source,
                start="thread" if source else "fresh",
                source_status="completed" if source else None,
            )
        lines.append(orjson.dumps(event, option=orjson.OPT_NON_STR_KEYS) + b"\n")
    (folder / CYCLE).write_bytes(b"".join(lines))
    states = {key if k == template.key else k: v for k, v in template.states.items()}
    write_atomic(folder / STATE, encode(states), durable=False)  # a bench fixture, not a save
    (folder / OUTPUT).write_bytes(template.output)


def workspace(base: Path, name: str, runs: int, keys: int, templates: list[Template]) -> str:
    """A workspace of ``runs`` runs over ``keys`` keys; returns the timed key's newest run."""
    layout = Layout(base / name)
    layout.ensure()
    names = [f"flow-{n:02d}" for n in range(keys)]
    latest: dict[str, str] = {}
    start = time.time() - runs  # one run a second, ending now
    for n in range(runs):
        last = n == runs - 1
        key = TARGET if last else names[n % keys]
        # The timed key's newest run is the same picked-up loop run in every workspace.
        template = templates[1] if last else templates[n % len(templates)]
        at = start + n
        run_id = new_run_id(at)
        clone(layout.runs, template, run_id, key, latest.get(key), at)
        latest[key] = run_id
    index.rebuild(layout)
    assert len(list_run_ids(layout)) == runs
    return latest[TARGET]


def timed(layout: Layout, calls: int) -> tuple[float, float]:
    """Wall-clock and CPU seconds per ``plan`` call, over ``calls`` calls.

    Everything is in the page cache, so the CPU time is the cost itself; it is
    printed too because it stays readable on a machine shared with other work.
    """
    wall, cpu = time.perf_counter(), time.process_time()
    for _ in range(calls):
        plan(layout, TARGET, resumable=True)
    return (time.perf_counter() - wall) / calls, (time.process_time() - cpu) / calls


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer runs and calls (smoke)")
    parser.add_argument("--small", type=int, default=10, help="runs in the small workspace")
    parser.add_argument("--large", type=int, help="runs in the large one (10,000; quick: 1,000)")
    parser.add_argument(
        "--keys",
        type=int,
        default=10,
        help="keys the runs are spread over, in both workspaces (10: the goal is about runs, "
        "so the keys are held equal; a larger number shows the cost per key)",
    )
    parser.add_argument("--batches", type=int, help="alternating batches (15; quick: 5)")
    parser.add_argument("--calls", type=int, help="plan() calls per batch (200; quick: 50)")
    parser.add_argument("--dir", type=Path, help="where to build the workspaces (a temp dir)")
    args = parser.parse_args()
    large = args.large or (1000 if args.quick else 10_000)
    batches = args.batches or (5 if args.quick else 15)
    calls = args.calls or (50 if args.quick else 200)

    base = Path(tempfile.mkdtemp(prefix="flowdrop-bench-", dir=args.dir))
    try:
        made = time.perf_counter()
        templates = real_runs(base)
        sizes = {"small": args.small, "large": large}
        expected = {
            name: workspace(base, name, runs, args.keys, templates) for name, runs in sizes.items()
        }
        made = time.perf_counter() - made
        layouts = {name: Layout(base / name) for name in sizes}
        for name, layout in layouts.items():  # both resolve the same way, to the same record
            got = plan(layout, TARGET, resumable=True)
            assert got.start == "thread" and got.source == expected[name], (name, got)
            timed(layout, calls)  # warm up
        per_call: dict[str, list[float]] = {name: [] for name in sizes}
        ratios, cpu_ratios = [], []
        for n in range(batches):
            cpu: dict[str, float] = {}
            for name in sorted(layouts, reverse=n % 2 == 1):  # alternate which goes first
                wall, cpu[name] = timed(layouts[name], calls)
                per_call[name].append(wall)
            ratios.append(per_call["large"][-1] / per_call["small"][-1])
            cpu_ratios.append(cpu["large"] / cpu["small"])
    finally:
        shutil.rmtree(base, ignore_errors=True)

    ratio = statistics.median(ratios)
    print(f"resolve: plan() of {TARGET!r}, whose thread has a latest run to pick up from")
    print(f"  workspaces built in {made:.1f} s under {base.parent} (runs over {args.keys} keys)")
    for name, runs in sizes.items():
        print(f"  {runs:>6} runs: {statistics.median(per_call[name]) * 1e6:8.1f} us per call")
    print(
        f"  ratio ({large} / {args.small} runs): {ratio:.3f}  "
        f"(median of {batches} alternating batches of {calls} calls; "
        f"spread {min(ratios):.3f}-{max(ratios):.3f})"
    )
    print(f"  ratio in CPU time: {statistics.median(cpu_ratios):.3f}")
    print(f"  goal <= {GOAL}: {'met' if ratio <= GOAL else 'NOT met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
