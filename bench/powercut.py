"""Power cuts: a run frozen at a chosen system call, its disk copied as it stands, the copy
checked after the journal is replayed (docs/reliability.md; docs/decisions.md, "Durability").

A workspace lives on a loop-mounted filesystem image (ext4, ext4 without a journal,
ext2). Each trial runs the real ``flowdrop-tui run`` under ``strace``, which stops it
(SIGSTOP) right after its Nth call of one kind — ``fdatasync``, ``fsync``, ``rename``,
``renameat2``, ``write`` (appends), ``pwrite64`` (state bytes), ``openat`` — or lets it
finish. The image file is then copied: what the loop device has written is what a
disk would hold after a power cut at that instant (the filesystem's page cache is not
in it). The copy is checked with ``e2fsck -fy`` (which replays the journal), mounted,
and checked; every failure is a **loss**:

1. every ``state.json`` parses and holds a state the flow set;
2. a run whose start was reported (its announce line on stderr) has its record, and
   its ``created`` event;
3. the last save the flow reported (``saved N``, printed after the key set returned) is
   on disk: the run's state has ``n >= N``;
4. a pause or an end that was reported (the last stderr line) is in the record;
5. the next run on the copy starts (exit 0) from at least the last reported state.

ext4 is mounted ``commit=600,noauto_da_alloc`` so that only the engine's own syncs put
anything on disk while a trial runs (no periodic journal commit, no flush-on-rename
heuristic to lean on). Needs root, loop devices, ``strace`` and ``e2fsprogs``.

    python bench/powercut.py                       # 70 cut points on each filesystem
    python bench/powercut.py --points 10 --json    # the suite's small version
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

FILESYSTEMS = {
    "ext4": (
        ["mkfs.ext4", "-E", "lazy_itable_init=0,lazy_journal_init=0"],
        "commit=600,noauto_da_alloc",
    ),
    "ext4-nojournal": (
        ["mkfs.ext4", "-O", "^has_journal", "-E", "lazy_itable_init=0"],
        "noauto_da_alloc",
    ),
    "ext2": (["mkfs.ext2"], ""),
}
KINDS = ("fdatasync", "fsync", "rename", "renameat2", "write", "pwrite64", "openat")
IMAGE_MB = 64
FLOW = """
import os, subprocess, sys
from flowdrop_tui import flow

@flow(resumable=True, budget={"rounds": 1000000})
def main(run):
    s = run.state
    print(f"start {s.get('n', 0)}", flush=True)
    rounds = int(os.environ.get("PC_ROUNDS", "3"))
    done = 0
    for _ in run.rounds():
        n = s.get("n", 0) + 1
        s.update(n=n, half=n // 2)  # one save: every state the flow sets has half == n // 2
        print(f"saved {n} round {run.round}", flush=True)
        done += 1
        if done >= rounds:
            if os.environ.get("PC_PAUSE") == "1":
                subprocess.run(
                    [sys.executable, "-m", "flowdrop_tui", "pause", run.run_id],
                    check=True, capture_output=True,
                )
            else:
                return n
"""


def sh(*args: str, check: bool = True, **kwargs: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(args), check=check, capture_output=True, text=True, **kwargs)


def can_run() -> str | None:
    """Why this machine cannot run the harness, or ``None``."""
    if os.geteuid() != 0:
        return "needs root (loop mounts)"
    for tool in ("strace", "mkfs.ext4", "mkfs.ext2", "e2fsck", "mount", "umount"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed"
    with tempfile.TemporaryDirectory() as scratch:
        image, mnt = Path(scratch) / "img", Path(scratch) / "mnt"
        mnt.mkdir()
        with open(image, "wb") as handle:
            handle.truncate(8 << 20)
        if sh("mkfs.ext4", "-q", "-F", str(image), check=False).returncode != 0:
            return "mkfs.ext4 failed"
        done = sh("mount", "-o", "loop", str(image), str(mnt), check=False)
        if done.returncode != 0:
            return f"loop mounts are not possible here: {done.stderr.strip()}"
        sh("umount", str(mnt), check=False)
    return None


class Disk:
    """One filesystem image, loop-mounted, holding one workspace."""

    def __init__(self, root: Path, fs: str) -> None:
        self.fs = fs
        self.image = root / f"{fs}.img"
        self.mnt = root / f"{fs}.mnt"
        self.copy = root / f"{fs}.copy.img"
        self.copy_mnt = root / f"{fs}.copy.mnt"
        self.mnt.mkdir()
        self.copy_mnt.mkdir()
        mkfs, self.options = FILESYSTEMS[fs]
        with open(self.image, "wb") as handle:
            handle.truncate(IMAGE_MB << 20)
        sh(*mkfs, "-q", "-F", str(self.image))
        self.mount(self.image, self.mnt)
        self.ws = self.mnt / "ws"
        sh("git", "init", "-q", str(self.ws))
        (self.ws / "flows" / "count").mkdir(parents=True)
        (self.ws / "flows" / "count" / "flow.py").write_text(textwrap.dedent(FLOW))
        self.settle()

    def mount(self, image: Path, where: Path, extra: str = "") -> None:
        options = ",".join(o for o in ("loop", self.options, extra) if o)
        sh(
            "mount",
            "-t",
            "ext2" if self.fs == "ext2" else "ext4",
            "-o",
            options,
            str(image),
            str(where),
        )

    def settle(self) -> None:
        """Everything so far on disk: the next trial starts from a clean image."""
        sh("sync", "-f", str(self.mnt))

    def close(self) -> None:
        for where in (self.copy_mnt, self.mnt):
            sh("umount", str(where), check=False)


def run_cli(
    ws: Path, *args: str, env: dict[str, str], timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "flowdrop_tui", *args],
        cwd=ws,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def frozen_run(
    disk: Disk, scratch: Path, kind: str, nth: int, env: dict[str, str]
) -> tuple[bool, str, str]:
    """Run ``flowdrop-tui run count`` stopped right after its ``nth`` ``kind`` call, then copy
    the image as it stands. Returns (whether it was cut, stdout, stderr)."""
    trace, out, err = scratch / "trace", scratch / "out", scratch / "err"
    trace.unlink(missing_ok=True)
    stop = [] if kind == "end" else [
        "strace", "-qq", "-o", str(trace), "-e", f"trace={kind}",
        "-e", f"inject={kind}:signal=SIGSTOP:when={nth}",
    ]  # fmt: skip
    with open(out, "w") as o, open(err, "w") as e:
        tracer = subprocess.Popen(
            [*stop, sys.executable, "-m", "flowdrop_tui", "run", "count"],
            cwd=disk.ws,
            env=env,
            stdout=o,
            stderr=e,
        )
        cut = False
        deadline = time.monotonic() + 90
        while tracer.poll() is None and time.monotonic() < deadline:
            with contextlib.suppress(OSError):
                if b"stopped by SIGSTOP" in trace.read_bytes():
                    cut = True
                    break
            time.sleep(0.005)
        shutil.copyfile(disk.image, disk.copy)  # the power cut: what reached the device
        if tracer.poll() is None:
            for child in _children(tracer.pid):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(child, 9)
            tracer.kill()
        tracer.wait()
    return cut, out.read_text(errors="replace"), err.read_text(errors="replace")


def _children(pid: int) -> list[int]:
    try:
        return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def check_copy(
    disk: Disk, stdout: str, stderr: str, env: dict[str, str]
) -> tuple[list[str], dict[str, Any]]:
    """Replay the journal of the copy, mount it, and check it; the losses found."""
    fold, read_events, read_states = engine()

    losses: list[str] = []
    fsck = sh("e2fsck", "-fy", str(disk.copy), check=False)
    if fsck.returncode >= 4 and os.environ.get("PC_FSCK_LOG"):
        with open(os.environ["PC_FSCK_LOG"], "a") as log:
            log.write(fsck.stdout + fsck.stderr + "\n=====\n")
            again = sh("e2fsck", "-fy", str(disk.copy), check=False)
            log.write(f"second pass: exit {again.returncode}\n{again.stdout}\n=====\n")
    if fsck.returncode >= 4:
        said = " | ".join((fsck.stdout + fsck.stderr).strip().splitlines()[-6:])
        return [f"e2fsck could not repair the copy (exit {fsck.returncode}): {said}"], {}
    disk.mount(disk.copy, disk.copy_mnt)
    seen: dict[str, Any] = {"fsck": fsck.returncode}
    try:
        ws = disk.copy_mnt / "ws"
        runs = ws / ".flowdrop" / "runs"
        losses += check_first_look(ws, runs, env, seen)
        for folder in sorted(runs.iterdir()) if runs.is_dir() else []:
            if folder.name.startswith(".") or not (folder / "state.json").exists():
                continue
            try:
                states = read_states(folder / "state.json")
            except Exception as exc:
                losses.append(f"{folder.name}/state.json unusable: {exc}")
                continue
            if not valid_state(states.get("count", {})):
                losses.append(f"{folder.name}/state.json holds a state never set: {states}")
        announced = re.search(r"^(?:run|resuming run) (\S+) of count", stderr, re.M)
        saved = [int(x) for x in re.findall(r"^saved (\d+) round \d+$", stdout, re.M)]
        rounds = [int(x) for x in re.findall(r"^saved \d+ round (\d+)$", stdout, re.M)]
        resumed = bool(re.search(r"^resuming run ", stderr, re.M))
        seen["resumed"] = resumed
        ended = re.search(r"^run (\S+) (completed|paused) \(", stderr, re.M)
        if announced:
            run_id = announced.group(1)
            record = runs / run_id / "cycle.jsonl"
            info = fold(run_id, runs / run_id, read_events(record))
            seen["run"] = run_id
            if not info.has_created:
                losses.append(f"run {run_id} was reported started; its record has no created event")
            if saved:
                try:
                    n = read_states(runs / run_id / "state.json").get("count", {}).get("n", 0)
                except Exception:
                    n = -1
                seen["saved"], seen["on_disk"] = saved[-1], n
                if n < saved[-1]:
                    losses.append(
                        f"run {run_id}: saved {saved[-1]} was reported; the disk holds n={n}"
                    )
            if ended and str(info.recorded) != ended.group(2):
                losses.append(
                    f"run {run_id} was reported {ended.group(2)}; its record says {info.recorded}"
                )
            if resumed and rounds and str(info.recorded) == "paused":
                # issue 27 item 3: back paused at its old position — the record's last pause
                # is from before the round whose save was reported (a pause after it, made
                # durable just before the cut and not yet reported, is the run's own)
                pauses = [e for e in read_events(record) if e["event"] == "paused"]
                at = pauses[-1].get("round") if pauses else None
                if not isinstance(at, int) or at < rounds[-1]:
                    losses.append(
                        f"run {run_id} was resumed and saved round {rounds[-1]}; its record "
                        f"says paused at round {at}"
                    )
        if rounds:
            losses += check_counters(ws, rounds[-1], env, seen)
        env1 = {**env, "PC_ROUNDS": "1", "PC_PAUSE": "0"}
        nxt = run_cli(ws, "run", "count", env=env1)
        start = re.search(r"^start (\d+)$", nxt.stdout, re.M)
        if nxt.returncode != 0 or start is None:
            losses.append(
                f"the next run did not start cleanly (exit {nxt.returncode}): {nxt.stderr[-300:]}"
            )
        elif saved and int(start.group(1)) < saved[-1]:
            losses.append(
                f"the next run started from n={start.group(1)}; saved {saved[-1]} was reported"
            )
        if announced and nxt.returncode == 0:
            losses += check_settled(runs / announced.group(1), saved[-1] if saved else 0)
    finally:
        sh("umount", str(disk.copy_mnt), check=False)
        with contextlib.suppress(OSError):
            disk.copy.unlink()
    return losses, seen


def check_first_look(ws: Path, runs: Path, env: dict[str, str], seen: dict[str, Any]) -> list[str]:
    """Issue 37: after a power cut, the first command that looks (``flows``) leaves every
    ``state.json`` valid JSON as it stands on disk — read as bytes, by no tool of ours —
    holding a state the flow set (the last reported save is checked below)."""
    if not runs.is_dir():
        return []
    looked = run_cli(ws, "flows", env=env)
    losses = []
    if looked.returncode != 0:
        losses.append(
            f"flows failed after the cut (exit {looked.returncode}): {looked.stderr[-300:]}"
        )
    checked = 0
    for folder in sorted(runs.iterdir()):
        path = folder / "state.json"
        if folder.name.startswith(".") or not path.exists():
            continue
        try:
            data = orjson.loads(path.read_bytes())
        except (OSError, orjson.JSONDecodeError) as exc:
            losses.append(f"{folder.name}/state.json after one flows: {exc}")
            continue
        checked += 1
        if not isinstance(data, dict) or not valid_state(data.get("count", {})):
            losses.append(f"{folder.name}/state.json after one flows holds {data}")
    seen["whole_after_flows"] = checked
    return losses


def check_counters(
    ws: Path, last_round: int, env: dict[str, str], seen: dict[str, Any]
) -> list[str]:
    """Issue 27 item 4: what the chain carries on is as durable as the state — the next
    round comes after the last round whose save was reported, and the rounds budget has
    counted at least that many (the chain starts at round 1 and counts every round)."""
    plan = run_cli(ws, "plan", "count", "--json", env=env)
    try:
        data = orjson.loads(plan.stdout)
        next_round, used = data["next_round"], data["budget"]["rounds"]["used"]
    except (orjson.JSONDecodeError, KeyError, TypeError):
        return [f"plan failed (exit {plan.returncode}): {plan.stderr[-300:]}"]
    seen["next_round"], seen["rounds_used"], seen["last_round"] = next_round, used, last_round
    losses = []
    if not isinstance(next_round, int) or next_round <= last_round:
        losses.append(
            f"round {last_round} was reported saved; the next round would be {next_round}"
        )
    if not isinstance(used, int) or used < last_round:
        losses.append(
            f"round {last_round} was reported saved; the rounds budget counts {used} used"
        )
    return losses


def check_settled(run_dir: Path, saved: int) -> list[str]:
    """After the next run picked it up, the cut run's ``state.json`` itself is whole and
    current (repaired from its state log when the cut left it behind), and no log stays."""
    try:
        data = orjson.loads((run_dir / "state.json").read_bytes())
        n = data.get("count", {}).get("n", 0)
    except (OSError, orjson.JSONDecodeError, AttributeError) as exc:
        return [f"{run_dir.name}/state.json after the next run: {exc}"]
    losses = []
    if not valid_state(data.get("count", {})) or n < saved:
        losses.append(f"{run_dir.name}/state.json after the next run holds {data}; saved {saved}")
    if (run_dir / "state.log").exists():
        losses.append(f"{run_dir.name}/state.log is still there after the next run")
    return losses


def calibrate(disk: Disk, scratch: Path, env: dict[str, str]) -> dict[str, int]:
    """How many calls of each kind one run makes (the range cut points are drawn from)."""
    summary = scratch / "summary"
    subprocess.run(
        [
            "strace",
            "-qq",
            "-c",
            "-o",
            str(summary),
            "-e",
            "trace=" + ",".join(KINDS),
            sys.executable,
            "-m",
            "flowdrop_tui",
            "run",
            "count",
        ],
        cwd=disk.ws,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    counts = {}
    for line in summary.read_text().splitlines():
        fields = line.split()
        if fields and fields[-1] in KINDS:
            counts[fields[-1]] = int(fields[3]) if len(fields) >= 6 else int(fields[-2])
    disk.settle()
    return {kind: counts[kind] for kind in KINDS if counts.get(kind)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", type=int, default=70, help="cut points per filesystem")
    parser.add_argument("--fs", default=",".join(FILESYSTEMS), help="filesystems to try")
    parser.add_argument("--dir", type=Path, help="where the images go (not a tmpfs)")
    parser.add_argument(
        "--cuts",
        help="exact trials for each filesystem instead of random ones: "
        "KIND:N:pause|complete,… (KIND 'end': the run ends, then the power goes)",
    )
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
    env = {k: v for k, v in os.environ.items() if not k.startswith("PC_")}
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    figures: dict[str, Any] = {
        "seed": seed,
        "cut_points": 0,
        "ran_to_the_end": 0,
        "losses": 0,
        "loss_details": [],
        "by_fs": {},
        "by_kind": Counter(),
        "reported_saves_checked": 0,
        "reported_ends_checked": 0,
        "resumed_runs_cut": 0,
        "resumed_saves_checked": 0,
        "counters_checked": 0,
    }
    started = time.monotonic()
    root = Path(tempfile.mkdtemp(prefix="flowdrop-powercut-", dir=args.dir))
    try:
        for fs in args.fs.split(","):
            disk = Disk(root, fs)
            try:
                scratch = root / f"{fs}.scratch"
                scratch.mkdir()
                counts = calibrate(disk, scratch, {**env, "PC_ROUNDS": "3"})
                tried = lost = 0
                plan = [tuple(c.split(":")) for c in args.cuts.split(",")] if args.cuts else None
                while (tried < len(plan)) if plan is not None else (tried < args.points):
                    if plan is not None:
                        kind, nth_text, how = plan[tried]
                        nth, pause = int(nth_text), how == "pause"
                    else:
                        kind = rng.choice([*sorted(counts), "end"])
                        nth = rng.randint(1, counts[kind]) if kind != "end" else 0
                        pause = rng.random() < 0.4
                    rounds = str(rng.randint(1, 3))
                    trial_env = {**env, "PC_ROUNDS": rounds, "PC_PAUSE": "1" if pause else "0"}
                    cut, out, err = frozen_run(disk, scratch, kind, nth, trial_env)
                    losses, seen = check_copy(disk, out, err, env)
                    disk.settle()
                    if cut or kind == "end" or plan is not None:
                        tried += 1
                        figures["cut_points"] += 1
                        figures["by_kind"][kind] += 1
                    else:
                        figures["ran_to_the_end"] += 1
                    figures["reported_saves_checked"] += "saved" in seen
                    figures["resumed_runs_cut"] += bool(seen.get("resumed")) and cut
                    figures["resumed_saves_checked"] += (
                        bool(seen.get("resumed")) and "saved" in seen
                    )
                    figures["counters_checked"] += "next_round" in seen
                    figures["reported_ends_checked"] += bool(
                        re.search(r"^run \S+ (completed|paused) \(", err, re.M)
                    )
                    if losses:
                        lost += 1
                        figures["losses"] += 1
                        figures["loss_details"].append(
                            {
                                "fs": fs,
                                "kind": kind,
                                "nth": nth,
                                "cut": cut,
                                "pause": pause,
                                "losses": losses,
                            }
                        )
                    if args.verbose:
                        print(
                            f"{fs} {kind}#{nth} cut={cut} {seen} {losses or 'ok'}", file=sys.stderr
                        )
                figures["by_fs"][fs] = {
                    "cut_points": tried,
                    "losses": lost,
                    "calls_per_run": counts,
                }
            finally:
                disk.close()
    finally:
        for leftover in root.glob("*.mnt"):
            sh("umount", "-l", str(leftover), check=False)
        shutil.rmtree(root, ignore_errors=True)
    figures["seconds"] = round(time.monotonic() - started, 1)
    figures["by_kind"] = dict(figures["by_kind"])
    if args.json:
        print(orjson.dumps(figures).decode())
    else:
        print(
            f"power cuts: {figures['cut_points']} cut points "
            f"({figures['ran_to_the_end']} runs ran to the end), "
            f"{figures['losses']} losses, {figures['seconds']} s, seed {seed}"
        )
        for fs, row in figures["by_fs"].items():
            print(f"  {fs}: {row['cut_points']} cut points, {row['losses']} losses")
        for detail in figures["loss_details"]:
            print(f"  LOSS {detail}")
    return 0 if figures["losses"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
