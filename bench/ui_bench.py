"""The UI's speed goals, as ratios measured in one run (SPEC §13, issue 5):

(a) start to the first painted flow list, 50 flows and 10,000 runs, against a bare
    Textual app painting a 50-row DataTable;               goal ≤ 1.5
(b) peak memory of the same two (each in its own process);  goal ≤ 1.5
(c) an event appended to a live run's cycle.jsonl to its row on screen, against raw
    ``watchfiles.awatch`` reporting the same append;        goal ≤ 1.5

Every app runs in its own child process on a real pseudo-terminal of 120x40, so
it draws as it would for a user. Usage: ``python bench/ui_bench.py [--rounds N]``.
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
from flowdrop_tui.core.records.events import LIVE, load_run

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from ui_workspace import make  # noqa: E402

CHILD = str(HERE / "ui_child.py")
GOAL = 1.5


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


def measure_latency(mode: str, target: Path, scratch: Path, samples: int) -> list[float]:
    out = scratch / f"{mode}.json"
    out.unlink(missing_ok=True)
    in_terminal([sys.executable, CHILD, mode, str(target), str(out), str(samples)])
    return list(orjson.loads(out.read_bytes())["latencies"])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=11, help="start-ups of each app (a, b)")
    parser.add_argument("--samples", type=int, default=40, help="appends timed each way (c)")
    parser.add_argument(
        "--workspace",
        type=Path,
        default=Path(tempfile.gettempdir()) / "flowdrop-bench-ui",
        help="where the 10,000-run workspace is kept",
    )
    args = parser.parse_args()
    started = time.monotonic()
    layout = make(args.workspace)
    print(
        f"workspace {layout.workspace}: 50 flows, 10,000 runs "
        f"(ready in {time.monotonic() - started:.1f} s)"
    )
    scratch = Path(tempfile.mkdtemp(prefix="flowdrop-bench-"))
    # Bytecode for this package, as any installed package has (pip compiles on install,
    # and textual's was compiled when it was installed). Without it — e.g. an editable
    # install under PYTHONDONTWRITEBYTECODE — every start would compile flowdrop_tui anew.
    import flowdrop_tui

    compileall.compile_dir(str(Path(flowdrop_tui.__file__).parent), quiet=1)

    ours: list[dict[str, Any]] = []
    bare: list[dict[str, Any]] = []
    measure_paint("paint-ours", layout.workspace, scratch)  # warm the OS file cache alike
    measure_paint("paint-bare", None, scratch)
    for _ in range(args.rounds):  # alternate, so drift on the machine hits both alike
        ours.append(measure_paint("paint-ours", layout.workspace, scratch))
        bare.append(measure_paint("paint-bare", None, scratch))
    paint_ours = statistics.median(r["seconds"] for r in ours)
    paint_bare = statistics.median(r["seconds"] for r in bare)
    rss_ours = max(r["maxrss_kb"] for r in ours) / 1024
    rss_bare = max(r["maxrss_kb"] for r in bare) / 1024
    if not all(r["settled"] for r in ours):
        print("note: a start-up had not settled within the limit when memory was read")

    launched = launch.launch_run(layout, layout.flows / "flow_00", "flow_00", fresh=True)
    run_id = str(launched["run"])
    try:
        raw = measure_latency("latency-raw", layout.runs / run_id, scratch, args.samples)
        ui = measure_latency("latency-ours", layout.workspace, scratch, args.samples)
    finally:
        if load_run(layout, run_id).status in LIVE:
            verbs.stop(layout, run_id, now=True)
    shutil.rmtree(scratch, ignore_errors=True)
    latency_raw = statistics.median(raw)
    latency_ui = statistics.median(ui)

    rows = [
        ("(a) first paint, s", paint_ours, paint_bare),
        ("(b) peak memory, MiB", rss_ours, rss_bare),
        ("(c) append to screen, ms", latency_ui * 1000, latency_raw * 1000),
    ]
    print(f"\n{'':28}{'flowdrop-tui':>14}{'baseline':>12}{'ratio':>8}  goal ≤ {GOAL}")
    failed = False
    for name, mine, base in rows:
        ratio = mine / base
        failed = failed or ratio > GOAL
        print(
            f"{name:28}{mine:14.3f}{base:12.3f}{ratio:8.2f}  {'met' if ratio <= GOAL else 'MISSED'}"
        )
    print(
        f"\n(a), (b): medians / peaks of {args.rounds} start-ups each; baseline: a bare "
        "Textual app with a 50-row DataTable.\n(c): medians of "
        f"{args.samples} appends each; baseline: raw watchfiles.awatch on the run's folder."
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
