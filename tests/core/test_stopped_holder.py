"""A process stopped with Ctrl-Z (SIGSTOP) while it holds ``index.lock`` (issue 27,
item 11): `prune` and `pin` wait for it with a deadline and name the holder, as `run`
and `reindex` already do, instead of blocking silently for good. A real stopped
process, real commands."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import CLI, write_flow

ONE_ROUND = """
    from flowdrop_tui import flow

    @flow(resumable=True)
    def main(run):
        for r in run.rounds(range(1)):
            run.state["n"] = run.state.get("n", 0) + 1
        return "ok"
"""

HOLD_LOCK = """
import fcntl, os, sys, time
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o644)
fcntl.flock(fd, fcntl.LOCK_EX)
print("held", flush=True)
time.sleep(600)
"""

HANG_GUARD = 60  # a guard against blocking for good, not a speed assertion


@pytest.fixture
def stopped_holder(workspace: Path, cli: CLI) -> Iterator[subprocess.Popen[str]]:
    """Three runs of ``a``, then a process holding ``index.lock``, stopped as Ctrl-Z does."""
    write_flow(workspace, "a", ONE_ROUND)
    for _ in range(3):
        cli("run", "a", check=0)
    lock = workspace / ".flowdrop" / "index.lock"
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_LOCK, str(lock)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        os.kill(holder.pid, signal.SIGSTOP)
        yield holder
    finally:
        holder.kill()
        holder.wait()


def runs_of(ws: Path) -> list[str]:
    return sorted(p.name for p in (ws / ".flowdrop" / "runs").iterdir() if p.name[0] != ".")


def _answer(cli: CLI, *args: str) -> subprocess.CompletedProcess[str]:
    try:
        return cli(*args, timeout=HANG_GUARD)
    except subprocess.TimeoutExpired:
        pytest.fail(f"`flowdrop-tui {' '.join(args)}` blocked past {HANG_GUARD} s, silently")


@pytest.mark.parametrize("verb", ["pin", "prune"])
def test_a_stopped_process_holding_the_index_lock_never_blocks_prune_or_pin_silently(
    workspace: Path, cli: CLI, stopped_holder: subprocess.Popen[str], verb: str
) -> None:
    """Guards against `prune` and `pin` waiting for good, saying nothing, on an
    `index.lock` held by a process stopped with Ctrl-Z."""
    runs = runs_of(workspace)
    args = ("pin", runs[0]) if verb == "pin" else ("prune", "--keep", "0")
    done = _answer(cli, *args)
    assert done.returncode == 3, (done.stdout, done.stderr)
    lock = workspace / ".flowdrop" / "index.lock"
    assert f"{lock} is held by process {stopped_holder.pid}" in done.stderr
    assert "Ctrl-Z" in done.stderr and "Traceback" not in done.stderr
    assert runs_of(workspace) == runs  # nothing deleted behind the holder's back
    assert not (workspace / ".flowdrop" / "pins" / runs[0]).exists()
    stopped_holder.kill()  # once it is gone, both go through
    stopped_holder.wait()
    cli(*args, check=0)
    if verb == "pin":
        assert (workspace / ".flowdrop" / "pins" / runs[0]).is_file()
    else:
        assert runs_of(workspace) == runs[-1:]
