"""(a) as a user sees it: ``flowdrop-tui`` started in tmux, against a bare Textual app.

Each start is a new tmux session (on a tmux server of this script's own) running the
real command — ``python -m flowdrop_tui --workspace W``, nothing measured inside it —
or the bare app (``ui_child.py bare``: a 50-row DataTable and a footer, unmeasured);
the clock runs from the ``new-session`` call to the first ``capture-pane`` that shows
the first and sixth rows of the table. The two alternate; medians. The capture is
polled every ``--poll`` seconds, which both sides pay alike (and which costs the
machine a little, so the figures are a little higher than ``ui_bench.py``'s pty ones).

Usage: ``python bench/ui_tmux_paint.py [--rounds 9] [--size 80x24] [--runs 100000]``.
"""

from __future__ import annotations

import argparse
import compileall
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from ui_workspace import make  # noqa: E402

GOAL = 1.25  # issue 28
TMUX = ["tmux", "-L", f"flowdrop-paint-{os.getpid()}"]


def start_to_rows(
    command: list[str], size: str, poll: float, where: Path, timeout: float = 30.0
) -> float:
    """Seconds from starting ``command`` in a new tmux session to its rows on screen.
    It starts in ``where``: ``python -m`` puts its folder first on ``sys.path``, so a
    checkout there would be what runs, whatever ``PYTHONPATH`` says."""
    width, height = size.split("x")
    name = f"paint-{time.monotonic_ns()}"
    line = " ".join(subprocess.list2cmdline([a]) for a in command)
    started = time.perf_counter()
    subprocess.run(
        [*TMUX, "new-session", "-d", "-s", name, "-c", str(where), "-x", width, "-y", height, line]
    )
    try:
        while time.perf_counter() - started < timeout:
            shown = subprocess.run(
                [*TMUX, "capture-pane", "-p", "-t", name], capture_output=True, text=True
            ).stdout
            if "flow_00" in shown and "flow_05" in shown:
                return time.perf_counter() - started
            time.sleep(poll)
        raise RuntimeError(f"{line} showed no rows in {timeout:g} s")
    finally:
        subprocess.run([*TMUX, "send-keys", "-t", name, "q"], capture_output=True)
        time.sleep(0.5)  # let it leave by itself, then make sure
        subprocess.run([*TMUX, "kill-session", "-t", name], capture_output=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=9, help="start-ups of each app")
    parser.add_argument("--size", default="80x24", help="the terminal, COLSxROWS")
    parser.add_argument("--poll", type=float, default=0.01, help="seconds between captures")
    parser.add_argument("--runs", type=int, default=100_000, help="runs in the workspace")
    parser.add_argument("--dir", type=Path, default=Path(tempfile.gettempdir()))
    args = parser.parse_args()
    layout = make(args.dir / f"flowdrop-bench-ui-{args.runs}", runs=args.runs)
    import flowdrop_tui  # its bytecode, as an installed package has (ui_bench.py says why)

    compileall.compile_dir(str(Path(flowdrop_tui.__file__).parent), quiet=1)
    ours = [sys.executable, "-m", "flowdrop_tui", "--workspace", str(layout.workspace)]
    bare = [sys.executable, str(HERE / "ui_child.py"), "bare"]
    # A session that outlives the measured ones: the last one closing stops the server.
    subprocess.run([*TMUX, "new-session", "-d", "-s", "keep", "sleep 86400"], check=True)
    times: dict[str, list[float]] = {"ours": [], "bare": []}
    try:
        where = layout.workspace
        start_to_rows(ours, args.size, args.poll, where)  # warm the OS file cache alike
        start_to_rows(bare, args.size, args.poll, where)
        for _ in range(args.rounds):
            times["ours"].append(start_to_rows(ours, args.size, args.poll, where))
            times["bare"].append(start_to_rows(bare, args.size, args.poll, where))
    finally:
        subprocess.run([*TMUX, "kill-server"], capture_output=True)
    mine, base = statistics.median(times["ours"]), statistics.median(times["bare"])
    ratio = mine / base
    print(
        f"first paint in tmux at {args.size}, {args.runs:,} runs, medians of {args.rounds} "
        f"(load average {os.getloadavg()[0]:.1f}): flowdrop-tui {mine:.3f} s, bare "
        f"{base:.3f} s, ratio {ratio:.2f} (goal ≤ {GOAL}: {'met' if ratio <= GOAL else 'MISSED'})"
    )
    return 0 if ratio <= GOAL else 1


if __name__ == "__main__":
    sys.exit(main())
