"""A stop or a pause that loses the race with the run's natural end (issue 27, item 13):
it had been accepted (exit 0) and its request file left in the ended run's record. Now
it says the run ended (exit 3, TERMINAL_SNAPSHOT) and withdraws the request; a run that
ends removes any request it never took.

The race is made exact with ``strace``: the asker is frozen (SIGSTOP) by the
``mkdir`` of the run's ``requests/`` folder — after it read the run as running, before
it posted — and let go once the run has ended. Skipped, saying why, without strace.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.waiting import wait_for

BENCH = Path(__file__).resolve().parent.parent.parent / "bench"
sys.path.insert(0, str(BENCH))
from faults import can_run  # noqa: E402

WHY = can_run()

FLOW = """
import os, time
from flowdrop_tui import flow

@flow(resumable=True)
def main(run):
    for _ in run.rounds():
        print("waiting", flush=True)
        while not os.path.exists(os.environ["RACE_GO"]):
            time.sleep(0.02)
        return 1
"""


def _children(pid: int) -> list[int]:
    try:
        return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


@pytest.mark.skipif(WHY is not None, reason=f"I/O-fault harness: {WHY}")
@pytest.mark.parametrize("verb", ["stop", "pause"])
def test_a_request_that_loses_the_race_with_the_runs_end_says_it_ended(
    tmp_path: Path, verb: str
) -> None:
    ws = tmp_path / "ws"
    subprocess.run(["git", "init", "-q", str(ws)], check=True)
    (ws / "flows" / "racer").mkdir(parents=True)
    (ws / "flows" / "racer" / "flow.py").write_text(textwrap.dedent(FLOW))
    go = tmp_path / "go"
    env = {**os.environ, "RACE_GO": str(go), "PYTHONDONTWRITEBYTECODE": "1"}
    cli = [sys.executable, "-m", "flowdrop_tui"]
    run = subprocess.Popen(
        [*cli, "run", "racer"], cwd=ws, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    asker: subprocess.Popen[bytes] | None = None
    try:
        assert run.stdout is not None
        assert run.stdout.readline() == b"waiting\n"
        (run_id,) = os.listdir(ws / ".flowdrop" / "runs")
        run_dir = ws / ".flowdrop" / "runs" / run_id
        trace = tmp_path / "trace"
        freeze = ["strace", "-qq", "-f", "-o", str(trace), "-P", str(run_dir / "requests")]
        freeze += ["-e", "trace=mkdir,mkdirat", "-e", "inject=mkdir,mkdirat:signal=SIGSTOP"]
        asker = subprocess.Popen(
            [*freeze, *cli, verb, run_id],
            cwd=ws,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        wait_for(
            lambda: trace.exists() and b"stopped by SIGSTOP" in trace.read_bytes(),
            60,
            interval=0.02,
            what="the asker frozen before it posts",
        )
        go.touch()  # the run ends now, naturally, with no request to take
        assert run.wait(timeout=60) == 0
        for child in _children(asker.pid):
            os.kill(child, signal.SIGCONT)
        out, err = asker.communicate(timeout=60)
        assert asker.returncode == 3, out + err
        assert b"ended (completed) before taking the request" in err, err
        assert b"Traceback" not in err
        assert os.listdir(run_dir / "requests") == []
    finally:
        for process in (run, asker):
            if process is not None and process.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    for child in _children(process.pid):
                        os.kill(child, signal.SIGKILL)
                    process.kill()
                process.wait()
