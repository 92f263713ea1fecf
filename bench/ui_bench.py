"""The UI's speed goals, as ratios measured in one run (SPEC §13; docs/decisions.md, "Speed"):

(a) start to the first painted flow list, 50 flows and 100,000 runs, against a bare
    Textual app painting a 50-row DataTable;                       goal ≤ 1.25
(b) peak memory of the same two (each in its own process);          goal ≤ 1.5
(a'), (b') the same for 100,000 runs against 10,000: nothing at start-up grows
    with the number of runs;                                        goal ≤ 1.1
(c) an event appended to a live run's cycle.jsonl to its row on screen, against a
    bare Textual app following the file with ``watchfiles``' defaults; goal ≤ 1.0

The paints run on a real pseudo-terminal of 120x40, the latencies in tmux (a real
terminal emulator) at the same size, each app in its own process, alternating.
Usage: ``python bench/ui_bench.py [--rounds N] [--runs 100000]``.
"""

from __future__ import annotations

import argparse
import compileall
import fcntl
import os
import pty
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import termios
import threading
import time
from pathlib import Path
from typing import Any

import orjson

from flowdrop_tui.core.control import launch, verbs
from flowdrop_tui.core.records.run_record.run_fold import load_run
from flowdrop_tui.core.records.run_record.run_info import LIVE

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from ui_workspace import make  # noqa: E402

CHILD = str(HERE / "ui_child.py")
GOAL = 1.25  # first paint (issue 28; it was 1.5)
RSS_GOAL = 1.5
GROWTH_GOAL = 1.1
LATENCY_GOAL = 1.0


def in_terminal(args: list[str], timeout: float = 120.0) -> None:
    """Run ``args`` on a fresh 120x40 pseudo-terminal, draining what it draws."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    env["TERM"] = "xterm-256color"
    child = subprocess.Popen(
        args, stdin=slave, stdout=slave, stderr=slave, env=env, start_new_session=True
    )
    os.close(slave)

    def drain() -> None:
        while True:
            try:
                if not os.read(master, 65536):
                    break
            except OSError:
                break

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    try:
        child.wait(timeout=timeout)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        os.close(master)
    if child.returncode != 0:
        raise RuntimeError(f"{args[2]} exited with {child.returncode}")


def measure_paint(mode: str, workspace: Path | None, scratch: Path) -> dict[str, Any]:
    out = scratch / f"{mode}.json"
    out.unlink(missing_ok=True)
    args = [sys.executable, CHILD, mode, *([str(workspace)] if workspace else []), str(out)]
    started = time.time()
    in_terminal(args)
    result = orjson.loads(out.read_bytes())
    result["seconds"] = result["painted"] - started
    return result


TMUX = ["tmux", "-L", f"flowdrop-bench-{os.getpid()}"]  # a server of our own


def tmux_server() -> None:
    """Start our tmux server with a session that outlives the measured ones: killing
    the last session stops a server, and the next start could meet it dying."""
    subprocess.run([*TMUX, "new-session", "-d", "-s", "keep", "sleep 86400"], check=True)


def in_tmux(args: list[str], out: Path, timeout: float = 120.0) -> None:
    """Run ``args`` in a new tmux session of 120x40 until it has written ``out``."""
    name = f"measure-{time.monotonic_ns()}"
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "TMUX")}
    command = " ".join(subprocess.list2cmdline([a]) for a in args)
    subprocess.run(
        [*TMUX, "new-session", "-d", "-s", name, "-x", "120", "-y", "40", command],
        check=True,
        env={**env, "TERM": "xterm-256color"},
    )
    try:
        deadline = time.monotonic() + timeout
        while not out.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(0.3)  # let the app leave by itself
    finally:
        subprocess.run([*TMUX, "kill-session", "-t", name], capture_output=True)
    if not out.exists():
        raise RuntimeError(f"{args[2]} wrote nothing in {timeout:g} s")


def measure_latency(mode: str, target: Path, scratch: Path, samples: int) -> list[float]:
    out = scratch / f"{mode}.json"
    out.unlink(missing_ok=True)
    in_tmux([sys.executable, CHILD, mode, str(target), str(out), str(samples)], out)
    return list(orjson.loads(out.read_bytes())["latencies"])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=11, help="start-ups of each app (a, b)")
    parser.add_argument("--samples", type=int, default=20, help="appends timed per turn (c)")
    parser.add_argument("--turns", type=int, default=4, help="alternating turns each way (c)")
    parser.add_argument("--runs", type=int, default=100_000, help="runs in the big workspace")
    parser.add_argument("--small", type=int, default=10_000, help="runs in the small one")
    parser.add_argument(
        "--dir",
        type=Path,
        default=Path(tempfile.gettempdir()),
        help="where the benchmark workspaces are kept (and reused)",
    )
    args = parser.parse_args()
    started = time.monotonic()
    big = make(args.dir / f"flowdrop-bench-ui-{args.runs}", runs=args.runs)
    small = make(args.dir / f"flowdrop-bench-ui-{args.small}", runs=args.small)
    print(
        f"workspaces: 50 flows with {args.runs:,} and {args.small:,} runs "
        f"(ready in {time.monotonic() - started:.1f} s)"
    )
    scratch = Path(tempfile.mkdtemp(prefix="flowdrop-bench-"))
    # Bytecode for this package, as any installed package has (pip compiles on install,
    # and textual's was compiled when it was installed). Without it — e.g. an editable
    # install under PYTHONDONTWRITEBYTECODE — every start would compile flowdrop_tui anew.
    import flowdrop_tui

    compileall.compile_dir(str(Path(flowdrop_tui.__file__).parent), quiet=1)

    ours: list[dict[str, Any]] = []
    fewer: list[dict[str, Any]] = []
    bare: list[dict[str, Any]] = []
    measure_paint("paint-ours", big.workspace, scratch)  # warm the OS file cache alike
    measure_paint("paint-ours", small.workspace, scratch)
    measure_paint("paint-bare", None, scratch)
    for _ in range(args.rounds):  # alternate, so drift on the machine hits all alike
        ours.append(measure_paint("paint-ours", big.workspace, scratch))
        bare.append(measure_paint("paint-bare", None, scratch))
        fewer.append(measure_paint("paint-ours", small.workspace, scratch))
    paint_ours = statistics.median(r["seconds"] for r in ours)
    paint_fewer = statistics.median(r["seconds"] for r in fewer)
    paint_bare = statistics.median(r["seconds"] for r in bare)
    rss_ours = max(r["maxrss_kb"] for r in ours) / 1024
    rss_fewer = max(r["maxrss_kb"] for r in fewer) / 1024
    rss_bare = max(r["maxrss_kb"] for r in bare) / 1024
    if not all(r["settled"] for r in ours + fewer):
        print("note: a start-up had not settled within the limit when memory was read")

    tmux_server()
    launched = launch.launch_run(big, big.flows / "flow_00", "flow_00", fresh=True)
    run_id = str(launched["run"])
    ui: list[float] = []
    naive: list[float] = []
    try:
        for turn in range(args.turns):  # alternate which goes first
            pair = [
                ("latency-ours", big.workspace, ui),
                ("latency-bare", big.runs / run_id, naive),
            ]
            for mode, target, into in pair if turn % 2 == 0 else pair[::-1]:
                into.extend(measure_latency(mode, target, scratch, args.samples))
    finally:
        subprocess.run([*TMUX, "kill-server"], capture_output=True)
        if load_run(big, run_id).status in LIVE:
            verbs.stop(big, run_id, now=True)
    shutil.rmtree(scratch, ignore_errors=True)
    latency_ui = statistics.median(ui)
    latency_naive = statistics.median(naive)

    rows = [
        ("(a) first paint, s", paint_ours, paint_bare, GOAL),
        ("(b) peak memory, MiB", rss_ours, rss_bare, RSS_GOAL),
        (f"(a') paint {args.runs:,} / {args.small:,}", paint_ours, paint_fewer, GROWTH_GOAL),
        (f"(b') memory {args.runs:,} / {args.small:,}", rss_ours, rss_fewer, GROWTH_GOAL),
        ("(c) append to screen, ms", latency_ui * 1000, latency_naive * 1000, LATENCY_GOAL),
    ]
    print(f"\n{'':30}{'flowdrop-tui':>14}{'baseline':>12}{'ratio':>8}  goal")
    failed = False
    for name, mine, base, goal in rows:
        ratio = mine / base
        failed = failed or ratio > goal
        verdict = "met" if ratio <= goal else "MISSED"
        print(f"{name:30}{mine:14.3f}{base:12.3f}{ratio:8.2f}  ≤ {goal} {verdict}")
    print(
        f"\n(a), (b): medians / peaks of {args.rounds} start-ups each; baseline: a bare "
        "Textual app with a 50-row DataTable.\n(c): medians of "
        f"{args.samples * args.turns} appends each, in tmux; baseline: a bare Textual app "
        "following cycle.jsonl with watchfiles.awatch at its defaults."
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
