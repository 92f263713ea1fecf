"""A tight plain loop, this code against the code before SPEC §20's fingerprint
(``2d2a6db``), side by side: goal, within 10 % a round (bench/README.md, "(j)").

The loop has no agent session and sets three keys a round (each key set is a durable
save, SPEC §5) — what a counter or a batch does. Both codes run the same flow in
their own copy of the same repository (``--files`` committed files, default 3,000,
and 10 files), through the real command (``python -m flowdrop_tui run loop --fresh``,
the code chosen by ``PYTHONPATH``), in alternating order. A round's cost is read from
the run's own record: from its first ``round_started`` to its last ``round_ended``,
over the rounds. Prints each code's median per round over batches (with the spread)
and the ratio.

The old code is a checkout of it: ``git worktree add --detach /tmp/flowdrop-2d2a6db
2d2a6db``, then ``python bench/plain_loop.py --old /tmp/flowdrop-2d2a6db``. ``--quick``:
a small smoke run. Any other checkout compares with it (the code with the fingerprint
on every round, say).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import textwrap
from datetime import datetime
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent))

from round_moves import ENV, repository

NEW = Path(__file__).resolve().parents[1]
GOAL = 1.10  # this code's round within 10 % of the old code's

FLOW = """
from flowdrop_tui import flow

@flow(resumable=True, description="three key sets a round")
def main(run):
    for n in run.rounds(range(ROUNDS)):
        run.state["a"] = n
        run.state["b"] = -n
        run.state["c"] = str(n)
"""


def workspace(root: Path, files: int, rounds: int) -> Path:
    ws = repository(root, files)
    folder = ws / "flows" / "loop"
    folder.mkdir(parents=True)
    (folder / "flow.py").write_text(textwrap.dedent(FLOW).replace("ROUNDS", str(rounds)))
    (ws / ".gitignore").write_text(".flowdrop/\n")
    return ws


def per_round(code: Path, ws: Path) -> float:
    """One run of the loop with ``code``: milliseconds a round, from its record."""
    env = {**ENV, "PYTHONPATH": str(code)}
    subprocess.run(
        [sys.executable, "-m", "flowdrop_tui", "run", "loop", "--fresh"],
        cwd=ws,
        env=env,
        check=True,
        capture_output=True,
    )
    runs = sorted((ws / ".flowdrop" / "runs").iterdir())
    began = ended = None
    count = 0
    for line in (runs[-1] / "cycle.jsonl").read_bytes().splitlines():
        event = orjson.loads(line)
        if event.get("event") == "round_started" and began is None:
            began = datetime.fromisoformat(event["t"])
        elif event.get("event") == "round_ended":
            ended = datetime.fromisoformat(event["t"])
            count += 1
    assert began is not None and ended is not None and count
    return (ended - began).total_seconds() * 1000 / count


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--old", type=Path, required=True, help="a checkout of the old code")
    parser.add_argument("--files", type=int, default=3_000)
    parser.add_argument("--rounds", type=int, default=300)
    parser.add_argument("--batches", type=int, default=7)
    parser.add_argument("--dir", type=Path, default=None)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    if args.quick:
        args.files, args.rounds, args.batches = 300, 30, 2
    old = args.old.resolve()
    if not (old / "flowdrop_tui" / "__init__.py").is_file():
        parser.error(f"{old} is not a checkout of flowdrop-tui")
    named = subprocess.run(
        ["git", "rev-parse", "--short=7", "HEAD"], cwd=old, capture_output=True, text=True
    )
    label = named.stdout.strip() or "old"
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        base = Path(tmp)
        for size in (args.files, 10):
            spaces = {
                code: workspace(base / f"{name}-{size}", size, args.rounds)
                for name, code in (("new", NEW), ("old", old))
            }
            times: dict[Path, list[float]] = {NEW: [], old: []}
            for batch in range(args.batches):
                order = (NEW, old) if batch % 2 == 0 else (old, NEW)
                for code in order:
                    times[code].append(per_round(code, spaces[code]))
            new, before = statistics.median(times[NEW]), statistics.median(times[old])
            for name, code in (("this code", NEW), (label, old)):
                got = times[code]
                print(
                    f"{size:>6,} files, {name:>9}: {statistics.median(got):6.2f} ms a round "
                    f"(batches {min(got):.2f}–{max(got):.2f})"
                )
            ratio = new / before
            verdict = "met" if ratio <= GOAL else "NOT met"
            print(f"{size:>6,} files: ratio {ratio:.2f}; goal ≤ {GOAL:.2f}: {verdict}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
