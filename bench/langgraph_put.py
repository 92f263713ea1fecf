"""Benchmark (k): ``FlowdropSaver.put`` vs LangGraph's ``SqliteSaver.put`` (SPEC §22).

The same checkpoints (the state of bench (a), one channel changed per put) put by
both savers on the same thread, in the same directory, at the same durability:

- ours: ``FlowdropSaver(workspace=…).put`` — the checkpoint line appended to the
  thread's log and ``fdatasync``'d before it returns, and the graph's run recorded
  (a round's events, ``state.json`` replaced);
- the log alone: the same saver with ``record_runs=False`` (no run record), printed
  beside, to show what the run record adds;
- theirs: ``SqliteSaver.put`` in WAL mode with ``synchronous=FULL`` (one sync of the
  WAL per commit), as in bench (a).

Checkpoints are built before the clock starts; a warm-up takes SQLite to its steady
state; batches alternate which side goes first; the ratio (ours / theirs) is the
median of the per-pair ratios. Goal: ≤ 1.0 (a checkpoint costs no more than
SQLite's, as a key set does, SPEC §13).

    python bench/langgraph_put.py           # the full run
    python bench/langgraph_put.py --quick   # a smaller, faster run (smoke test)
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver, empty_checkpoint
from state_write import KEY, Theirs, choose_dir, filesystem, initial_state

from flowdrop_tui.langgraph import FlowdropSaver

GOAL = 1.0


class Puts:
    """One saver's puts on one thread, each a checkpoint one step past the last."""

    def __init__(self, saver: BaseCheckpointSaver[Any]) -> None:
        self.saver = saver
        self.config: Any = {"configurable": {"thread_id": KEY, "checkpoint_ns": ""}}
        self.values = initial_state()
        self.version = 0

    def batch(self, size: int) -> Callable[[], None]:
        prepared = []
        for _ in range(size):
            self.version += 1
            self.values["count"] = self.version
            checkpoint = empty_checkpoint()
            checkpoint["channel_values"] = dict(self.values)
            versions = dict.fromkeys(self.values, 1) | {"count": self.version}
            checkpoint["channel_versions"] = versions
            new = versions if self.version == 1 else {"count": self.version}
            prepared.append((checkpoint, {"source": "loop", "step": self.version}, new))
        saver = self.saver

        def run() -> None:
            config = self.config
            for checkpoint, metadata, new in prepared:
                config = saver.put(config, checkpoint, metadata, new)  # type: ignore[arg-type]
            self.config = config

        return run


def per_op(run: Callable[[], None], size: int) -> float:
    began = time.perf_counter()
    run()
    return (time.perf_counter() - began) / size


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer, smaller batches (smoke)")
    parser.add_argument("--batches", type=int, help="alternating batch pairs (15; quick: 3)")
    parser.add_argument("--size", type=int, help="puts per batch (200; quick: 30)")
    parser.add_argument("--warmup", type=int, help="puts before timing (2000; quick: 60)")
    parser.add_argument("--dir", type=Path, help="where to write (default: a temp dir on disk)")
    args = parser.parse_args()
    batches = args.batches or (3 if args.quick else 15)
    size = args.size or (30 if args.quick else 200)
    warmup = args.warmup if args.warmup is not None else (60 if args.quick else 2000)

    folder = Path(tempfile.mkdtemp(prefix="flowdrop-bench-", dir=choose_dir(args.dir)))
    try:
        (folder / "ws").mkdir()
        (folder / "log-only").mkdir()
        flowdrop = FlowdropSaver(workspace=folder / "ws")
        log_only = FlowdropSaver(workspace=folder / "log-only", record_runs=False)
        sqlite = Theirs(folder)
        sides = {"ours": Puts(flowdrop), "theirs": Puts(sqlite.saver), "log": Puts(log_only)}
        ours = sides["ours"]
        for side in sides.values():
            side.batch(warmup)()
        timings: dict[str, list[float]] = {name: [] for name in sides}
        ratios, log_ratios = [], []
        for n in range(batches):
            runs = {name: side.batch(size) for name, side in sides.items()}
            order = ("ours", "theirs", "log") if n % 2 == 0 else ("log", "theirs", "ours")
            for name in order:
                timings[name].append(per_op(runs[name], size))
            ratios.append(timings["ours"][-1] / timings["theirs"][-1])
            log_ratios.append(timings["log"][-1] / timings["theirs"][-1])
        latest = flowdrop.get_tuple({"configurable": {"thread_id": KEY}})
        assert latest is not None and latest.checkpoint["channel_values"]["count"] == ours.version
        flowdrop.close()
        log_only.close()
        sqlite.close()
    finally:
        shutil.rmtree(folder, ignore_errors=True)

    ratio = statistics.median(ratios)
    print("langgraph_put: FlowdropSaver.put vs SqliteSaver.put of the same checkpoints")
    print(f"  directory: {folder.parent} ({filesystem(folder.parent)})")
    print(f"  sqlite: journal_mode={sqlite.mode} synchronous={sqlite.sync} (FULL)")
    print(f"  FlowdropSaver.put:{' ' * 22}{statistics.median(timings['ours']) * 1e6:7.1f} us")
    print(f"  SqliteSaver.put:{' ' * 24}{statistics.median(timings['theirs']) * 1e6:7.1f} us")
    print(
        f"  ratio (ours / sqlite): {ratio:.3f}  (median of {batches} alternating batch pairs "
        f"of {size}; spread {min(ratios):.3f}-{max(ratios):.3f})"
    )
    print(
        f"  the log alone (record_runs=False): {statistics.median(timings['log']) * 1e6:.1f} us, "
        f"ratio {statistics.median(log_ratios):.3f}"
    )
    print(f"  goal <= {GOAL}: {'met' if ratio <= GOAL else 'NOT met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
