"""A run whose ``cycle.jsonl`` is giant (a week-long fast loop): time and peak memory of
each command that reads it (docs/reliability.md, "Giant records").

A real flow is run (``run loop``, holding in its first round on a file), and its
record is grown, while it is live, to ``--size-mb`` of lines in the real format:
per round a ``round_started``, a ``log`` (the round's key set, logged) and a
``round_ended`` with its ``moved``, a ``warning`` every 1,000 rounds (appended in
whole lines with ``O_APPEND``, as the run's own writer does). Then, each command a
child process run as a user would (``python -m flowdrop_tui …``), its wall time and
peak RSS (``os.wait4``'s ``ru_maxrss``):

- ``stop RUN`` of that live run, and the run's own end (the time from the stop to
  its exit, and its process's peak RSS: it folds the record to report its end);
- ``flows``, ``runs loop``, ``show RUN``, ``plan loop`` (a pick-up from it) and
  ``reindex``, each cold (no fold cache: ``.flowdrop/cache/folds`` removed) then warm;
- a real pick-up, ``run loop``, to its first round (its peak RSS then: ``VmHWM``).

Goals: a listing well under 1 s warm and a few seconds cold; peak RSS bounded
(tens of MB) whatever the record's size. Each child runs under ``--cap-mb`` of
address space and ``--timeout`` seconds; one that dies of either is reported so.
Usage: ``python bench/giant_record.py [--size-mb 1024] [--dir DIR] [--quick]``.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
ENV = {
    **os.environ,
    "GIT_AUTHOR_NAME": "b",
    "GIT_AUTHOR_EMAIL": "b@b",
    "GIT_COMMITTER_NAME": "b",
    "GIT_COMMITTER_EMAIL": "b@b",
    "PYTHONPATH": str(ROOT),
}
FLOW = """
import os, time
from flowdrop_tui import flow

@flow(resumable=True, stall=None)
def main(run):
    for r in run.rounds():
        run.state["n"] = r
        run.log("round", n=r)
        while os.path.exists({hold!r}):
            time.sleep(0.05)
        time.sleep(0.05)
"""
HEAD = "35b6eab3dc0f88102973a0ebeecdd76edb68a754"


def workspace(base: Path) -> tuple[Path, Path]:
    ws = base / "ws"
    (ws / "flows" / "loop").mkdir(parents=True)
    hold = base / "hold"
    (ws / "flows" / "loop" / "flow.py").write_text(FLOW.format(hold=str(hold)))
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=ws, check=True, env=ENV)
    subprocess.run(["git", "add", "-A"], cwd=ws, check=True, env=ENV)
    subprocess.run(["git", "commit", "-qm", "flow"], cwd=ws, check=True, env=ENV)
    return ws, hold


def grow(cycle: Path, size: int, first: int) -> int:
    """Append rounds ``first``… in the real format until the record is ``size`` bytes;
    the number of rounds appended."""
    moved = {
        "head": HEAD,
        "tree": "49e58de240f3778d1ce344e1caae0aba",
        "state": "0" * 32,
        "progress": None,
        "paths": {"flows/loop/flow.py": "e1faa7b14bfb"},
        "changed": ["state"],
        "sessions": [],
        "failure": None,
    }
    fd = os.open(cycle, os.O_WRONLY | os.O_APPEND)
    rounds = 0
    try:
        while os.fstat(fd).st_size < size:
            out = bytearray()
            for n in range(first + rounds, first + rounds + 5000):
                clock = f"{n // 3600 % 24:02d}:{n // 60 % 60:02d}:{n % 60:02d}"
                t = f"2026-01-0{1 + n // 400_000 % 9}T{clock}.000Z"
                out += orjson.dumps(
                    {
                        "t": t,
                        "event": "round_started",
                        "key": "loop",
                        "round": n,
                        "index": None,
                        "head": HEAD,
                    }
                )
                out += b"\n" + orjson.dumps(
                    {"t": t, "event": "log", "key": "loop", "message": "round", "fields": {"n": n}}
                )
                moved["state"] = f"{n:032x}"
                out += b"\n" + orjson.dumps(
                    {
                        "t": t,
                        "event": "round_ended",
                        "key": "loop",
                        "round": n,
                        "index": None,
                        "outcome": "ok",
                        "seconds": 0.051,
                        "moved": moved,
                    }
                )
                out += b"\n"
                if n % 1000 == 0:
                    message = f"state: a save failed at round {n} (disk full), saved again"
                    out += orjson.dumps(
                        {"t": t, "event": "warning", "kind": "state", "message": message}
                    )
                    out += b"\n"
            os.write(fd, out)  # whole lines, one write: as the run's own writer appends
            rounds += 5000
    finally:
        os.close(fd)
    return rounds


class Child:
    """One command as a user runs it, in its own process: wall time and peak RSS."""

    def __init__(self, ws: Path, args: list[str], cap_mb: int, out: Path) -> None:
        def limits() -> None:
            cap = cap_mb << 20
            resource.setrlimit(resource.RLIMIT_AS, (cap, cap))

        self.began = time.perf_counter()
        self.out = out.open("wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "flowdrop_tui", *args],
            cwd=ws,
            env=ENV,
            stdout=self.out,
            stderr=subprocess.STDOUT,
            preexec_fn=limits,
        )

    def wait(self, timeout: float) -> tuple[float, float, int | str]:
        """(seconds, peak RSS in MB, exit status or why it was ended)."""
        deadline = time.monotonic() + timeout
        why: int | str | None = None
        while True:
            pid, status, usage = os.wait4(self.proc.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() > deadline and why is None:
                os.kill(self.proc.pid, signal.SIGKILL)
                why = f"killed after {timeout:.0f} s"
            time.sleep(0.01)
        took = time.perf_counter() - self.began
        self.proc.returncode = os.waitstatus_to_exitcode(status)
        self.out.close()
        return took, usage.ru_maxrss / 1024, why if why is not None else self.proc.returncode


def run_ids(ws: Path) -> list[str]:
    return sorted(p.name for p in (ws / ".flowdrop" / "runs").iterdir() if p.name[:1].isdigit())


def has_round(cycle: Path) -> bool:
    try:
        return b'"event":"round_started"' in cycle.read_bytes()[:200_000]
    except OSError:
        return False


def wait_until(check: object, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():  # type: ignore[operator]
            return True
        time.sleep(0.02)
    return False


def vm_hwm(pid: int) -> float:
    """The peak RSS so far of ``pid`` and its children, in MB (the largest)."""
    peaks = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            status = (proc / "status").read_text()
        except OSError:
            continue
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        if proc.name == str(pid) or fields.get("PPid", "").strip() == str(pid):
            peaks.append(int(fields.get("VmHWM", "0 kB").split()[0]) / 1024)
    return max(peaks, default=0.0)


def report(name: str, took: float, peak: float, status: int | str) -> None:
    note = "" if status == 0 else f"  ({status})"
    print(f"{name:<34} {took:8.2f} s  {peak:8.1f} MB{note}", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mb", type=int, default=1024)
    parser.add_argument("--dir", type=Path, default=None)
    parser.add_argument("--cap-mb", type=int, default=8192, help="each child's address space")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per command")
    parser.add_argument("--quick", action="store_true", help="a 20 MB record: a smoke run")
    parser.add_argument(
        "--cold-stop",
        action="store_true",
        help="stop the run while the round that grew its record is still in flight",
    )
    args = parser.parse_args()
    if args.quick:
        args.size_mb = 20
    base = Path(tempfile.mkdtemp(prefix="giant-", dir=args.dir))
    try:
        return measure(base, args)
    finally:
        shutil.rmtree(base, ignore_errors=True)


def measure(base: Path, args: argparse.Namespace) -> int:
    ws, hold = workspace(base)
    logs = base / "logs"
    logs.mkdir()
    hold.write_text("")
    live = Child(ws, ["run", "loop"], args.cap_mb, logs / "run-a")
    if not wait_until(lambda: (ws / ".flowdrop" / "runs").is_dir() and run_ids(ws), 60):
        print("the run did not start")
        return 1
    run_id = run_ids(ws)[0]
    cycle = ws / ".flowdrop" / "runs" / run_id / "cycle.jsonl"
    if not wait_until(lambda: has_round(cycle), 180):
        print("the run did not reach its first round:", (logs / "run-a").read_text()[-2000:])
        return 1
    began = time.perf_counter()
    rounds = grow(cycle, args.size_mb << 20, 2)
    size = cycle.stat().st_size
    print(
        f"record: {size / (1 << 20):,.0f} MB, {rounds:,} rounds appended "
        f"in {time.perf_counter() - began:.0f} s ({ws})",
        flush=True,
    )
    print(f"{'command':<34} {'time':>10}  {'peak RSS':>11}")

    def one(name: str, argv: list[str]) -> None:
        child = Child(ws, argv, args.cap_mb, logs / name.replace(" ", "_"))
        report(name, *child.wait(args.timeout))

    if args.cold_stop:  # the record grew within one round: the run never folded it
        stopping = Child(ws, ["stop", run_id], args.cap_mb, logs / "stop")
        report("stop RUN, cold (the command)", *stopping.wait(args.timeout))
    else:  # as a long loop grows it: round after round, the run folds what it appended
        released = time.perf_counter()
        hold.unlink()
        kept = ws / ".flowdrop" / "cache" / "folds" / f"{run_id}.json"
        caught = wait_until(lambda: kept.exists(), args.timeout)
        took = time.perf_counter() - released
        said = "its fold kept" if caught else "NOT caught up"
        print(f"{'the live run folds what it appended':<34} {took:8.2f} s  ({said})", flush=True)
        hold.write_text("")  # it holds again in its next round
        stopping = Child(ws, ["stop", run_id], args.cap_mb, logs / "stop")
        report("stop RUN (the command)", *stopping.wait(args.timeout))
    ending = time.perf_counter()
    hold.unlink()
    _, peak, status = live.wait(args.timeout)
    report("the run's end after stop", time.perf_counter() - ending, peak, status)
    one("for scale: --version", ["--version"])  # the interpreter's and the CLI's start-up
    for name, argv in (
        ("flows", ["flows", "--json"]),
        ("runs loop", ["runs", "loop", "--json"]),
        ("show RUN", ["show", run_id, "--json"]),
        ("plan loop", ["plan", "loop", "--json"]),
        ("reindex", ["reindex"]),
    ):
        shutil.rmtree(ws / ".flowdrop" / "cache" / "folds", ignore_errors=True)
        one(f"{name} (cold)", argv)
        one(f"{name} (warm)", argv)
    hold.write_text("")
    before = set(run_ids(ws))
    picking = Child(ws, ["run", "loop"], args.cap_mb, logs / "run-b")
    found: list[str] = []

    def first_round() -> bool:
        if picking.proc.poll() is not None:
            return True
        new = sorted(set(run_ids(ws)) - before)
        found[:] = new
        return bool(new) and has_round(ws / ".flowdrop" / "runs" / new[0] / "cycle.jsonl")

    if wait_until(first_round, args.timeout) and found and picking.proc.returncode is None:
        report(
            "run loop (pick-up, to round 1)",
            time.perf_counter() - picking.began,
            vm_hwm(picking.proc.pid),
            0,
        )
        subprocess.run(
            [sys.executable, "-m", "flowdrop_tui", "stop", found[0]],
            cwd=ws,
            env=ENV,
            capture_output=True,
        )
        hold.unlink()
        picking.wait(args.timeout)
    else:
        hold.unlink(missing_ok=True)
        report("run loop (pick-up, to round 1)", *picking.wait(1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
