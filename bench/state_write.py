"""Benchmark (a): one key set on a flow's state vs LangGraph's ``SqliteSaver.put``.

What is timed, per operation, at the same durability:

- ours: ``state["count"] = n`` on the ``State`` a run's flow gets — the real
  path: ``State.__setitem__`` → ``StateFile.save`` → ``encode`` →
  ``Keeper.keep`` (``core/records/flow_state/state_log.py``): one record written into the
  run's pre-allocated ``state.log`` and ``fdatasync``'d, then ``state.json``
  replaced by an unsynced rename before the key set returns — when the key set
  returns it survives a power cut, as a SQLite commit does (bench/powercut.py
  checks exactly that);
- theirs: ``SqliteSaver.put`` of a checkpoint holding the same state, on a
  SQLite database in WAL mode with ``synchronous=FULL`` (checked with PRAGMA):
  one sync of the WAL per commit. The checkpoints are built before the clock
  starts, so only ``put`` is timed.

Both write to the same directory, after a warm-up that takes SQLite's WAL past
its first checkpoint (its steady state). Operations run in batches, alternating
ours and theirs; the ratio (ours / theirs) is the median of the per-pair ratios.
Goal (SPEC §13; docs/decisions.md, "Speed"): ≤ 1.0.

    python bench/state_write.py           # the full run
    python bench/state_write.py --quick   # a smaller, faster run (smoke test)
"""

from __future__ import annotations

import argparse
import os
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from langgraph.checkpoint.base import Checkpoint, CheckpointMetadata, empty_checkpoint
from langgraph.checkpoint.sqlite import SqliteSaver

from flowdrop_tui.core.records.flow_state.state import State, StateFile, read_run_states

GOAL = 1.0
KEY = "nightly"
FS_NAMES = {0xEF53: "ext4", 0x58465342: "xfs", 0x01021994: "tmpfs", 0x9123683E: "btrfs"}


def initial_state() -> dict[str, Any]:
    """What a flow keeps: a handful of things (the seed document's "small dict")."""
    return {
        "since": "20260817T014455.212Z-9f21ab",
        "count": 0,
        "last_round": 0,
        "done": [f"chapter-{n:02d}" for n in range(1, 9)],
        "decided": {"style": "terse", "target": "src/", "retries": 2},
    }


def filesystem(folder: Path) -> str:
    """The filesystem type and device of ``folder``, from /proc/self/mountinfo."""
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return "unknown"
    best = ("", "unknown")
    real = os.path.realpath(folder)
    for line in lines:
        fields = line.split()
        mount = fields[4]
        rest = fields[fields.index("-") + 1 :]
        inside = real == mount or real.startswith(mount.rstrip("/") + "/")
        if inside and len(mount) >= len(best[0]):
            best = (mount, f"{rest[0]} on {rest[1]}")
    return best[1]


def choose_dir(given: Path | None) -> Path:
    """A directory on a real disk: the given one, else the temp dir unless it is tmpfs."""
    if given is not None:
        return given
    default = Path(tempfile.gettempdir())
    if filesystem(default).startswith("tmpfs"):
        return Path(__file__).resolve().parent  # the checkout, which is on a disk
    return default


class Ours:
    """A run's state as a flow holds it; one key set per operation."""

    def __init__(self, folder: Path) -> None:
        self.file = StateFile(folder / "state.json")
        self.state: State = self.file.state(KEY, initial_state())
        self.n = 0

    def batch(self, size: int) -> Callable[[], None]:
        state = self.state
        first = self.n
        self.n += size

        def run() -> None:
            for n in range(first, first + size):
                state["count"] = n

        return run


class Theirs:
    """LangGraph's SQLite checkpointer, one ``put`` of the same state per operation."""

    def __init__(self, folder: Path) -> None:
        self.conn = sqlite3.connect(folder / "checkpoints.sqlite", check_same_thread=False)
        self.saver = SqliteSaver(self.conn)
        self.saver.setup()  # sets journal_mode=WAL
        self.conn.execute("PRAGMA synchronous=FULL")
        self.mode = self.conn.execute("PRAGMA journal_mode").fetchone()[0]
        self.sync = self.conn.execute("PRAGMA synchronous").fetchone()[0]
        assert (self.mode, self.sync) == ("wal", 2), (self.mode, self.sync)
        self.config: Any = {"configurable": {"thread_id": KEY, "checkpoint_ns": ""}}
        self.values = initial_state()
        self.version = 0

    def batch(self, size: int) -> Callable[[], None]:
        prepared: list[tuple[Checkpoint, CheckpointMetadata, dict[str, Any]]] = []
        for _ in range(size):
            self.version += 1
            self.values["count"] = self.version
            checkpoint = empty_checkpoint()
            checkpoint["channel_values"] = dict(self.values)
            checkpoint["channel_versions"] = {"count": self.version}
            metadata: CheckpointMetadata = {"source": "loop", "step": self.version}
            prepared.append((checkpoint, metadata, {"count": self.version}))
        saver = self.saver

        def run() -> None:
            config = self.config
            for checkpoint, metadata, versions in prepared:
                config = saver.put(config, checkpoint, metadata, versions)
            self.config = config

        return run

    def close(self) -> None:
        self.conn.close()


def per_op(run: Callable[[], None], size: int) -> float:
    began = time.perf_counter()
    run()
    return (time.perf_counter() - began) / size


def measure(
    folder_parent: Path, batches: int, size: int, warmup: int
) -> tuple[list[float], dict[str, list[float]], str, int, Path]:
    """One measurement in a fresh folder: the per-pair ratios, the timings, SQLite's mode."""
    folder = Path(tempfile.mkdtemp(prefix="flowdrop-bench-", dir=folder_parent))
    try:
        ours, theirs = Ours(folder), Theirs(folder)
        ours.batch(warmup)()
        theirs.batch(warmup)()
        timings: dict[str, list[float]] = {"ours": [], "theirs": []}
        ratios = []
        for n in range(batches):
            runs = {"ours": ours.batch(size), "theirs": theirs.batch(size)}
            order = ("ours", "theirs") if n % 2 == 0 else ("theirs", "ours")
            for name in order:
                timings[name].append(per_op(runs[name], size))
            ratios.append(timings["ours"][-1] / timings["theirs"][-1])
        theirs.close()
        assert read_run_states(folder)[KEY]["count"] == ours.n - 1  # what a power cut keeps
        ours.file.close()  # the run lets go: state.json durable, the log removed
        saved = ours.file.path.read_bytes()
        assert f'"count":{ours.n - 1}'.encode() in saved, saved[:200]
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return ratios, timings, theirs.mode, theirs.sync, folder


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer, smaller batches (smoke)")
    parser.add_argument("--batches", type=int, help="alternating batch pairs (15; quick: 3)")
    parser.add_argument("--size", type=int, help="operations per batch (300; quick: 50)")
    parser.add_argument("--warmup", type=int, help="operations before timing (2000; quick: 100)")
    parser.add_argument(
        "--repeat", type=int, default=1, help="measurements in this run; the median is the figure"
    )
    parser.add_argument("--dir", type=Path, help="where to write (default: a temp dir on disk)")
    args = parser.parse_args()
    batches = args.batches or (3 if args.quick else 15)
    size = args.size or (50 if args.quick else 300)
    warmup = args.warmup if args.warmup is not None else (100 if args.quick else 2000)

    print("state_write: one key set vs SqliteSaver.put of the same state, same durability")
    medians = []
    for _ in range(max(1, args.repeat)):
        ratios, timings, mode, sync, folder = measure(choose_dir(args.dir), batches, size, warmup)
        ratio = statistics.median(ratios)
        medians.append(ratio)
        print(f"  directory: {folder.parent} ({filesystem(folder.parent)})")
        print(f"  sqlite: journal_mode={mode} synchronous={sync} (FULL)")
        ours_us = statistics.median(timings["ours"]) * 1e6
        theirs_us = statistics.median(timings["theirs"]) * 1e6
        print(f"  ours, key set (state log):     {ours_us:7.1f} us")
        print(f"  SqliteSaver.put:{' ' * 24}{theirs_us:7.1f} us")
        print(
            f"  ratio (ours / sqlite): {ratio:.3f}  (median of {batches} alternating batch pairs "
            f"of {size}; spread {min(ratios):.3f}-{max(ratios):.3f})"
        )
    ratio = statistics.median(medians)
    if len(medians) > 1:
        listed = ", ".join(f"{m:.3f}" for m in medians)
        print(f"  median of {len(medians)} measurements: {ratio:.3f} ({listed})")
    print(f"  goal <= {GOAL}: {'met' if ratio <= GOAL else 'NOT met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
