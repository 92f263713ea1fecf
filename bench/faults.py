"""I/O faults: the real ``flowdrop-tui run`` with a system call failing (docs/reliability.md;
docs/decisions.md, "Durability").

Each trial runs a flow that saves ``n`` and ``half`` a round under ``strace``, which makes one
kind of call — ``write``, ``pwrite64``, ``fsync``, ``fdatasync``, ``rename``,
``renameat2``, ``openat`` — fail with ``EIO`` or ``ENOSPC``, either once (its Nth call) or
every Nth call from then on (in the run's own process; its children — git, the flow
describe — are left alone). A last kind of trial needs no ``strace``: a real tmpfs
filled to a few kilobytes of its end. After every trial (any failure is **unclean**):

1. the process ended (no hang) — completed, failed, refused (exit 3), or a refusal
   before the run existed — and no traceback came from the engine itself (a fault
   while Python imports its own modules, before any run exists, is allowed one);
2. every ``state.json`` parses and holds a state the flow set (nothing published
   that was not saved);
3. a run that was announced has its record, starting with ``created``; a refused one
   left no run folder behind;
4. with no fault, the next run starts (exit 0) from the newest state on disk (the
   last good save stands and is picked up).

    python bench/faults.py                  # 8 trials per call kind and error, + 12 tmpfs
    python bench/faults.py --per-kind 1     # the suite's small version
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from collections import Counter
from pathlib import Path
from typing import Any

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent))
from harness_records import engine, valid_state

KINDS = ("write", "pwrite64", "fsync", "fdatasync", "rename", "renameat2", "openat")
ERRORS = ("EIO", "ENOSPC")
FLOW = """
import os
from flowdrop_tui import flow

@flow(resumable=True)
def main(run):
    s = run.state
    print(f"start {s.get('n', 0)}", flush=True)
    for i, _ in enumerate(run.rounds()):
        n = s.get("n", 0) + 1
        s.update(n=n, half=n // 2)  # one save: every state the flow sets has half == n // 2
        print(f"saved {n}", flush=True)
        if i + 1 >= int(os.environ.get("FAULT_ROUNDS", "3")):
            return n
"""


def can_run() -> str | None:
    if shutil.which("strace") is None:
        return "strace is not installed"
    done = subprocess.run(["strace", "-qq", "-o", os.devnull, "true"], capture_output=True)
    if done.returncode != 0:
        return f"strace cannot trace here: {done.stderr.decode(errors='replace').strip()}"
    return None


def workspace(root: Path, name: str) -> Path:
    ws = root / name
    subprocess.run(["git", "init", "-q", str(ws)], check=True)
    (ws / "flows" / "count").mkdir(parents=True)
    (ws / "flows" / "count" / "flow.py").write_text(textwrap.dedent(FLOW))
    return ws


def run(
    ws: Path, env: dict[str, str], prefix: list[str] | None = None, timeout: float = 60
) -> tuple[int | None, str, str]:
    try:
        done = subprocess.run(
            [*(prefix or []), sys.executable, "-m", "flowdrop_tui", "run", "count"],
            cwd=ws,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired as exc:
        return None, str(exc.stdout or ""), str(exc.stderr or "")
    return done.returncode, done.stdout, done.stderr


def engine_traceback(stderr: str) -> bool:
    """A traceback whose innermost frame is in the engine (not the flow, not an import)."""
    for block in stderr.split("Traceback (most recent call last):")[1:]:
        frames = re.findall(r'File "([^"]+)"', block)
        if any("importlib" in frame for frame in frames):
            continue  # a module failing to import (an openat fault): before any run exists
        if frames and "flowdrop_tui" in frames[-1] and "/flows/" not in frames[-1]:
            return True
    return False


def run_ids(ws: Path) -> set[str]:
    runs = ws / ".flowdrop" / "runs"
    return {p.name for p in runs.iterdir()} if runs.is_dir() else set()


def check(
    ws: Path, code: int | None, out: str, err: str, env: dict[str, str], before: set[str]
) -> list[str]:
    """The trial's problems; ``before``: the run folders there were before it."""
    _, read_events, read_states = engine()

    problems: list[str] = []
    if code is None:
        return ["the run hung (no exit in 60 s)"]
    announced = re.search(r"^(?:run|resuming run) (\S+) of count", err, re.M)
    if engine_traceback(err):
        problems.append(f"a traceback from the engine (exit {code}): {err[-600:]}")
    if code not in (0, 1, 3) and announced:
        problems.append(f"exit {code} for a run that existed: {err[-300:]}")
    runs = ws / ".flowdrop" / "runs"
    newest = 0
    last_status = None
    for folder in sorted(runs.iterdir()) if runs.is_dir() else []:
        if folder.name.startswith(".new-"):
            continue  # swept by the next rebuild; never listed
        if folder.name.startswith("."):
            continue
        evs = read_events(folder / "cycle.jsonl")
        ended = [e for e in evs if e["event"] == "ended"]
        if folder.name not in before:  # this trial's run
            last_status = ended[-1].get("outcome") if ended else None
        if not evs or evs[0]["event"] != "created":
            problems.append(f"{folder.name}: a run folder whose record has no created event")
        try:
            state = read_states(folder / "state.json").get("count", {})
        except Exception as exc:
            problems.append(f"{folder.name}/state.json unusable: {exc}")
            continue
        if not valid_state(state):
            problems.append(f"{folder.name}/state.json holds a state never set: {state}")
        newest = max(newest, state.get("n", 0))
    if code == 1 and last_status == "completed":
        problems.append("a completed run exited 1")
    if announced and not (runs / announced.group(1)).is_dir():
        problems.append(f"run {announced.group(1)} was announced and has no record")
    code2, out2, err2 = run(ws, {**env, "FAULT_ROUNDS": "1"})
    start = re.search(r"^start (\d+)$", out2, re.M)
    if code2 != 0 or start is None:
        problems.append(f"the next run did not start cleanly (exit {code2}): {err2[-300:]}")
    elif int(start.group(1)) != newest:
        problems.append(f"the next run started from n={start.group(1)}; the disk holds {newest}")
    return problems


def calibrate(ws: Path, env: dict[str, str], scratch: Path) -> dict[str, int]:
    summary = scratch / "summary"
    prefix = ["strace", "-qq", "-c", "-o", str(summary), "-e", "trace=" + ",".join(KINDS)]
    run(ws, env, prefix)
    counts: dict[str, int] = {}
    for line in summary.read_text().splitlines():
        fields = line.split()
        if fields and fields[-1] in KINDS:
            counts[fields[-1]] = int(fields[3]) if len(fields) >= 6 else int(fields[-2])
    return counts


def mount_tmpfs(where: Path, size_kb: int) -> bool:
    where.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size_kb}k", "tmpfs", str(where)],
        capture_output=True,
    )
    return done.returncode == 0


def full_tmpfs_trial(root: Path, index: int, free_kb: int, env: dict[str, str]) -> list[str]:
    """A real tmpfs with only ``free_kb`` left once the workspace is made."""
    disk = root / f"tmpfs-{index}"
    if not mount_tmpfs(disk, 4096):
        return []
    try:
        ws = workspace(disk, "ws")
        run(ws, {**env, "FAULT_ROUNDS": "1"})  # a first run to pick up from
        filler = disk / "filler"
        fd = os.open(filler, os.O_WRONLY | os.O_CREAT)
        with contextlib.suppress(OSError):
            while True:
                os.write(fd, b"\0" * 4096)
        os.close(fd)
        with contextlib.suppress(OSError):
            os.truncate(filler, max(0, filler.stat().st_size - free_kb * 1024))
        before = run_ids(ws)
        code, out, err = run(ws, {**env, "FAULT_ROUNDS": "3"})
        filler.unlink()  # room again for the checks' own next run
        return check(ws, code, out, err, env, before)
    finally:
        subprocess.run(["umount", "-l", str(disk)], capture_output=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--per-kind", type=int, default=8, help="trials per call kind and error")
    parser.add_argument(
        "--faults",
        help="exact faults instead of random ones: KIND:ERROR:WHEN,… (WHEN as strace's when=)",
    )
    parser.add_argument("--tmpfs", type=int, default=12, help="full-tmpfs trials")
    parser.add_argument("--dir", type=Path)
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args(argv)
    why = can_run()
    if why is not None:
        print(orjson.dumps({"skipped": why}).decode() if args.json else f"skipped: {why}")
        return 2
    seed = args.seed if args.seed is not None else random.randrange(1 << 30)
    rng = random.Random(seed)
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    figures: dict[str, Any] = {
        "seed": seed,
        "trials": 0,
        "unclean": 0,
        "details": [],
        "by_fault": Counter(),
        "outcomes": Counter(),
        "tmpfs_trials": 0,
    }
    started = time.monotonic()
    root = Path(tempfile.mkdtemp(prefix="flowdrop-faults-", dir=args.dir))
    try:
        scratch = root / "scratch"
        scratch.mkdir()
        calibration = workspace(root, "calibration")
        counts = calibrate(calibration, {**env, "FAULT_ROUNDS": "3"}, scratch)
        figures["calls_per_run"] = counts
        trials: list[tuple[str, str, str]] = []
        if args.faults:
            trials = [tuple(f.split(":")) for f in args.faults.split(",")]  # type: ignore[misc]
        else:
            for kind in KINDS:
                for error in ERRORS:
                    for trial in range(args.per_kind):
                        nth = rng.randint(1, max(1, counts.get(kind, 1)))
                        # once at the Nth call, or every Nth call from then on
                        trials.append((kind, error, f"{nth}+{nth}" if trial % 2 else str(nth)))
        workspaces: dict[tuple[str, str], Path] = {}
        for kind, error, when in trials:
            ws = workspaces.get((kind, error))
            if ws is None:
                ws = workspaces[(kind, error)] = workspace(root, f"{kind}-{error}")
                run(ws, {**env, "FAULT_ROUNDS": "1"})  # a state to pick up from
            prefix = [
                "strace", "-qq", "-o", os.devnull,
                "-e", f"trace={kind}", "-e", f"inject={kind}:error={error}:when={when}",
            ]  # fmt: skip
            before = run_ids(ws)
            code, out, err = run(ws, {**env, "FAULT_ROUNDS": "3"}, prefix)
            problems = check(ws, code, out, err, env, before)
            figures["trials"] += 1
            figures["by_fault"][f"{kind}:{error}"] += 1
            figures["outcomes"][f"exit {code}"] += 1
            if problems:
                figures["unclean"] += 1
                figures["details"].append(
                    {"fault": f"{kind}:{error}:when={when}", "problems": problems}
                )
            if args.verbose:
                print(f"{kind}:{error}:{when} exit={code} {problems or 'ok'}", file=sys.stderr)
        if os.geteuid() == 0:
            for i in range(args.tmpfs):
                free_kb = rng.choice([0, 4, 8, 12, 16, 24, 32, 64])
                problems = full_tmpfs_trial(root, i, free_kb, env)
                figures["trials"] += 1
                figures["tmpfs_trials"] += 1
                figures["by_fault"]["full tmpfs"] += 1
                if problems:
                    figures["unclean"] += 1
                    figures["details"].append(
                        {"fault": f"tmpfs {free_kb} KiB free", "problems": problems}
                    )
                if args.verbose:
                    print(f"tmpfs {free_kb} KiB free {problems or 'ok'}", file=sys.stderr)
    finally:
        for leftover in root.glob("tmpfs-*"):
            subprocess.run(["umount", "-l", str(leftover)], capture_output=True)
        shutil.rmtree(root, ignore_errors=True)
    figures["seconds"] = round(time.monotonic() - started, 1)
    figures["by_fault"] = dict(figures["by_fault"])
    figures["outcomes"] = dict(figures["outcomes"])
    if args.json:
        print(orjson.dumps(figures).decode())
    else:
        print(
            f"I/O faults: {figures['trials']} trials ({figures['tmpfs_trials']} on a full tmpfs), "
            f"{figures['unclean']} unclean, {figures['seconds']} s, seed {seed}"
        )
        print(f"  outcomes: {figures['outcomes']}")
        for detail in figures["details"]:
            print(f"  UNCLEAN {detail}")
    return 0 if figures["unclean"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
