#!/usr/bin/env python3
"""Concurrency harness: many runs starting and ending at once leave the index exact
(docs/decisions.md, "Crash safety and bad input").

Each trial, in a fresh workspace:

* 20 different flows are started at once (``run NAME --detach``, 20 processes in
  parallel), run a few rounds, and are stopped at once (``stop RUN --wait``);
* meanwhile 10 simultaneous starts of one more flow (which has a finished run
  to pick up) race: exactly one may run, the nine others are refused
  ``ALREADY_RUNNING`` (exit 3) and no record of them exists;
* a viewer runs ``flows --json`` in a loop the whole time: every call must exit 0
  and list every flow;
* afterwards ``.flowdrop/index.json`` must equal what the records rebuild, and
  every run must have ended ``cancelled``.

    python bench/concurrency.py --trials 10          # the figures
    python bench/concurrency.py --trials 1 --json    # what the test suite runs
"""

from __future__ import annotations

import argparse
import concurrent.futures
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

import orjson

from flowdrop_tui.core.paths import Layout
from flowdrop_tui.core.records.listing import index
from flowdrop_tui.core.records.run_record.run_fold import list_run_ids, load_run

LOOP = """
import time
from flowdrop_tui import flow


@flow(resumable=True)
def main(run):
    for r in run.rounds():
        run.state["r"] = r
        time.sleep(0.05)
"""

QUICK = """
from flowdrop_tui import flow


@flow(resumable=True)
def main(run):
    for r in run.rounds(range(2)):
        run.state["r"] = r
"""

# The viewer: `flows --json` in a loop until the stop file appears; one JSON line out.
VIEWER = """
import os, subprocess, sys, orjson
ws, stop, expected = sys.argv[1], sys.argv[2], set(sys.argv[3].split(","))
calls = errors = 0
last = ""
while not os.path.exists(stop) or calls == 0:
    done = subprocess.run([sys.executable, "-m", "flowdrop_tui", "flows", "--json"],
                          cwd=ws, capture_output=True)
    calls += 1
    try:
        rows = orjson.loads(done.stdout)
        names = {row["name"] for row in rows}
        bad = [row["name"] for row in rows if row["error"]]
        ok = done.returncode == 0 and expected <= names and not bad
    except (orjson.JSONDecodeError, TypeError, KeyError):
        ok = False
    if not ok:
        errors += 1
        last = (done.stdout + done.stderr).decode(errors="replace")[-500:]
print(orjson.dumps({"calls": calls, "errors": errors, "last_error": last}).decode())
"""


def cli(ws: Path, *args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "flowdrop_tui", *args],
        cwd=ws,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def make_workspace(root: Path, flows: int) -> tuple[Path, list[str]]:
    ws = root
    ws.mkdir(parents=True)
    subprocess.run(["git", "init", "-q"], cwd=ws, check=True)
    names = [f"f{i:02d}" for i in range(flows)]
    for name, body in [*((n, LOOP) for n in names), ("solo", LOOP), ("quick", QUICK)]:
        (ws / "flows" / name).mkdir(parents=True)
        (ws / "flows" / name / "flow.py").write_text(textwrap.dedent(body).lstrip())
    return ws, names


def wait_rounds(ws: Path, run_id: str, timeout: float = 120) -> bool:
    deadline = time.monotonic() + timeout
    layout = Layout(ws)
    while time.monotonic() < deadline:
        if load_run(layout, run_id).rounds >= 1:
            return True
        time.sleep(0.05)
    return False


def trial(root: Path, flows: int, starts: int) -> dict[str, Any]:
    ws, names = make_workspace(root, flows)
    problems: list[str] = []
    cli(ws, "flows", "--json")  # describe once: the starts race on starting, not on describing
    first = cli(ws, "run", "solo", "--fresh", "--detach", "--json")
    solo_before = orjson.loads(first.stdout)["run"]
    cli(ws, "stop", solo_before, "--wait")  # the racing starts will have a run to pick up
    stop_file = ws.parent / f"{ws.name}.stop"
    viewer = subprocess.Popen(
        [sys.executable, "-c", VIEWER, str(ws), str(stop_file), ",".join([*names, "solo"])],
        stdout=subprocess.PIPE,
        text=True,
    )
    jobs = [("run", name, "--detach", "--json") for name in names]
    jobs += [("run", "solo", "--detach", "--json")] * starts
    with concurrent.futures.ThreadPoolExecutor(len(jobs)) as pool:
        results = list(pool.map(lambda job: cli(ws, *job), jobs))
    started: dict[str, str] = {}
    for job, done in zip(jobs, results, strict=True):
        if done.returncode == 0:
            started.setdefault(job[1], "")
            if job[1] == "solo" and started[job[1]]:
                problems.append("two starts of one flow both ran")
            started[job[1]] = orjson.loads(done.stdout)["run"]
        elif job[1] != "solo":
            problems.append(f"{job[1]} did not start: {done.returncode} {done.stderr[-300:]}")
        elif done.returncode != 3 or "ALREADY_RUNNING" not in done.stdout:
            problems.append(f"a refused start said {done.returncode} {done.stdout[-300:]}")
    solo_codes = sorted(d.returncode for j, d in zip(jobs, results, strict=True) if j[1] == "solo")
    for run_id in started.values():
        if not wait_rounds(ws, run_id):
            problems.append(f"{run_id} never started a round")
    # A quick flow runs start to end repeatedly, so index writes also race with the stops.
    with concurrent.futures.ThreadPoolExecutor(len(started) + 1) as pool:
        quick = pool.submit(lambda: [cli(ws, "run", "quick", "--json") for _ in range(3)])
        stops = list(pool.map(lambda r: cli(ws, "stop", r, "--wait", "--json"), started.values()))
        quick_results = quick.result()
    problems += [f"stop exited {s.returncode}: {s.stderr[-300:]}" for s in stops if s.returncode]
    problems += [f"quick run exited {q.returncode}" for q in quick_results if q.returncode]
    stop_file.touch()
    out, _ = viewer.communicate(timeout=180)
    seen = orjson.loads(out)
    layout = Layout(ws)
    statuses = {load_run(layout, r).status for r in started.values()}
    if statuses != {"cancelled"}:
        problems.append(f"runs ended {sorted(statuses)}, not all cancelled")
    solo_runs = [r for r in list_run_ids(layout) if load_run(layout, r).key == "solo"]
    if len(solo_runs) != 2:
        problems.append(f"{len(solo_runs) - 1} records of the racing starts exist, not 1")
    on_disk = orjson.loads(layout.index.read_bytes())
    exact = on_disk == index._scan(layout)
    if not exact:
        problems.append("index.json differs from what the records rebuild")
    if seen["errors"]:
        problems.append(f"viewer: {seen['errors']} failed calls; last: {seen['last_error']}")
    return {
        "flows_started_at_once": sum(1 for n in names if n in started),
        "flows_stopped_cancelled": sum(1 for s in stops if s.returncode == 0),
        "simultaneous_starts": starts,
        "of_which_ran": solo_codes.count(0),
        "refused_already_running": solo_codes.count(3),
        "viewer_calls": seen["calls"],
        "viewer_errors": seen["errors"],
        "index_exact": exact,
        "problems": problems,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=10)
    parser.add_argument("--flows", type=int, default=20)
    parser.add_argument("--starts", type=int, default=10)
    parser.add_argument("--dir", type=Path, default=None)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="concurrency-", dir=args.dir))
    began = time.monotonic()
    trials = []
    for number in range(args.trials):
        trials.append(trial(root / f"ws{number:02d}", args.flows, args.starts))
    clean = sum(1 for t in trials if not t["problems"])
    figures = {
        "trials": args.trials,
        "clean_trials": clean,
        "flows_started_at_once": sum(t["flows_started_at_once"] for t in trials),
        "flows_stopped_cancelled": sum(t["flows_stopped_cancelled"] for t in trials),
        "simultaneous_starts": sum(t["simultaneous_starts"] for t in trials),
        "of_which_ran": sum(t["of_which_ran"] for t in trials),
        "viewer_calls": sum(t["viewer_calls"] for t in trials),
        "viewer_errors": sum(t["viewer_errors"] for t in trials),
        "index_exact": sum(1 for t in trials if t["index_exact"]),
        "problems": [p for t in trials for p in t["problems"]][:50],
        "seconds": round(time.monotonic() - began, 1),
    }
    if args.json:
        print(orjson.dumps(figures, option=orjson.OPT_INDENT_2).decode())
    else:
        print(
            f"{clean}/{args.trials} trials clean in {figures['seconds']} s: "
            f"{figures['flows_started_at_once']} flow starts at once, "
            f"{figures['flows_stopped_cancelled']} stopped at once; "
            f"{figures['of_which_ran']} of {figures['simultaneous_starts']} simultaneous starts "
            f"ran (one per trial); viewer {figures['viewer_errors']} errors in "
            f"{figures['viewer_calls']} calls; index exact {figures['index_exact']}/{args.trials}"
        )
        for problem in figures["problems"]:
            print("  PROBLEM", problem)
    if clean == args.trials:
        shutil.rmtree(root, ignore_errors=True)
    else:
        print(f"workspaces kept in {root}", file=sys.stderr)
    return 0 if clean == args.trials else 1


if __name__ == "__main__":
    os.environ.setdefault("PYTHONDONTWRITEBYTECODE", "1")
    sys.exit(main())
