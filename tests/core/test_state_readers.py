"""Outside readers of the workspace never fail or wait on a run (SPEC §5.1; issue 37).

A run stopped (Ctrl-Z, a debugger) inside its write lease made ``grep -r .`` fail with
"Resource temporarily unavailable" and a ``cat`` of its spare wait up to 45 s. Here a
real run sets keys in a tight loop and is stopped with SIGSTOP at 200 random instants;
while it is stopped every file under ``.flowdrop/`` is opened (``O_NONBLOCK``) and read,
and ``grep -r``, ``tar`` and ``cp -a`` go over the whole folder: no error, and no open
waits 100 ms (the property is "never waits"; the figure only tells a wait from none).
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import stat
import subprocess
import time
from pathlib import Path

import orjson
import pytest

from tests.conftest import CLI, wait_for, write_flow

TIGHT_LOOP = """
from flowdrop_tui import flow

@flow()
def main(run):
    n = 0
    while not run.stop_requested:
        n += 1
        run.state["n"] = n
"""

STOPS = 200


def _count(run_dir: Path) -> int:
    try:
        return int(orjson.loads((run_dir / "state.json").read_bytes())["busy"]["n"])
    except (OSError, orjson.JSONDecodeError, KeyError, TypeError):
        return 0


def _read_everything(records: Path) -> float:
    """Every file under ``records`` opened without blocking and read whole; the longest
    open, in seconds."""
    longest = 0.0
    for folder, _, names in os.walk(records):
        for name in names:
            path = os.path.join(folder, name)
            try:
                if not stat.S_ISREG(os.lstat(path).st_mode):
                    continue
            except FileNotFoundError:
                continue  # a temporary name renamed away before the writer stopped
            began = time.monotonic()
            try:
                fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
            except FileNotFoundError:
                continue
            longest = max(longest, time.monotonic() - began)
            try:
                while os.read(fd, 1 << 16):
                    pass
            finally:
                os.close(fd)
    return longest


@pytest.mark.skipif(
    not all(shutil.which(tool) for tool in ("grep", "tar", "cp")), reason="grep, tar, cp"
)
def test_readers_of_the_records_never_fail_or_wait_on_a_stopped_run(
    workspace: Path, cli: CLI, tmp_path: Path
) -> None:
    write_flow(workspace, "busy", TIGHT_LOOP)
    run_id = cli.json("run", "busy", "--detach")["run"]
    records = workspace / ".flowdrop"
    run_dir = records / "runs" / run_id
    wait_for(lambda: _count(run_dir) > 20)
    pid = int((run_dir / "live.lock").read_text())
    chance = random.Random(37)
    longest = 0.0
    failures: list[str] = []
    copies = tmp_path / "copies"
    copies.mkdir()
    try:
        for i in range(STOPS):
            target = _count(run_dir) + chance.randint(1, 15)  # a random instant ahead
            wait_for(lambda t=target: _count(run_dir) >= t, interval=0.0005)
            os.kill(pid, signal.SIGSTOP)
            try:
                tools = [
                    subprocess.Popen(
                        command,
                        stdout=subprocess.DEVNULL,
                        stderr=subprocess.PIPE,
                        cwd=workspace,
                    )
                    for command in (
                        ["grep", "-rc", "", ".flowdrop"],
                        ["tar", "-cf", "/dev/null", ".flowdrop"],
                        ["cp", "-a", ".flowdrop", str(copies / str(i))],
                    )
                ]
                longest = max(longest, _read_everything(records))
                for tool in tools:
                    _, err = tool.communicate(timeout=30)
                    if tool.returncode != 0 or err:
                        failures.append(f"stop {i}: {tool.args[0]} {tool.returncode} {err!r}")
            finally:
                os.kill(pid, signal.SIGCONT)
            shutil.rmtree(copies / str(i), ignore_errors=True)
    finally:
        os.kill(pid, signal.SIGCONT)
        cli("stop", run_id, "--wait", timeout=60)
    assert failures == []
    assert longest < 0.1, longest
    assert _count(run_dir) > 200
