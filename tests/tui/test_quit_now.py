"""Quitting never waits on background work, and always on what the user asked to be
written (docs/decisions.md, "Quitting the UI"; issue 28: ``q`` waited for the reads
under way — a cold size count, a flow that hangs when described)."""

from __future__ import annotations

import os
import shlex
import shutil
import sys
import threading
from pathlib import Path

import pytest

from flowdrop_tui.core import child_read
from flowdrop_tui.tui import user_writes
from tests.conftest import wait_for, write_flow
from tests.core.test_child_reads import SLEEPER, until_gone
from tests.tui.test_tmux import Tmux

HANGS_WHEN_DESCRIBED = """
    import os, sys, time
    open(os.path.join(os.path.dirname(__file__), "describing"), "w").write(str(os.getpid()))
    time.sleep(600)
    from flowdrop_tui import flow

    @flow(description="never answers")
    def main(run):
        pass
"""


def test_shutdown_never_waits_for_a_read() -> None:
    release = threading.Event()
    pool = user_writes.Executor(max_workers=1)
    read = pool.submit(lambda work: work(), release.wait)
    pool.shutdown(wait=True)  # what asyncio.run asks when the app closes
    assert not read.done()  # returned while the read still runs
    assert user_writes.in_flight() == 0
    user_writes.wait()  # a read is nothing the quit waits for
    release.set()
    read.result(timeout=60)


def test_a_write_the_user_asked_for_holds_the_quit_until_done() -> None:
    started, release = threading.Event(), threading.Event()

    @user_writes.user_write
    def write() -> str:
        started.set()
        release.wait()
        return "written"

    pool = user_writes.Executor(max_workers=1)
    done = pool.submit(lambda work: work(), write)  # as Textual submits a thread worker
    assert started.wait(60)
    assert user_writes.in_flight() == 1
    waiter = threading.Thread(target=user_writes.wait)
    waiter.start()
    waiter.join(0.2)
    assert waiter.is_alive()  # still held: the write is under way
    release.set()
    waiter.join(60)
    assert not waiter.is_alive()
    assert done.result() == "written" and user_writes.in_flight() == 0
    pool.shutdown()


def test_a_write_cancelled_before_it_began_holds_nothing() -> None:
    """Textual cancels a worker that had not started when the app closed."""
    release = threading.Event()

    @user_writes.user_write
    def write() -> None:
        raise AssertionError("never runs")

    pool = user_writes.Executor(max_workers=1)
    busy = pool.submit(lambda work: work(), release.wait)  # the one thread is busy
    queued = pool.submit(lambda work: work(), write)
    assert user_writes.in_flight() == 1
    assert queued.cancel()
    assert user_writes.in_flight() == 0
    release.set()
    busy.result(timeout=60)
    pool.shutdown()


def test_stop_all_ends_the_children_of_reads_still_waiting(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    reader = threading.Thread(
        target=child_read.child_output,
        args=([sys.executable, "-c", SLEEPER, str(pid_file)], 600),
        daemon=True,
    )
    reader.start()
    wait_for(pid_file.exists, timeout=60)
    pid = int(wait_for(pid_file.read_text, timeout=60))
    child_read.stop_all()
    assert until_gone(pid)
    reader.join(60)
    assert not reader.is_alive()


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")
def test_q_leaves_while_a_flow_is_still_being_described(workspace: Path, tmp_path: Path) -> None:
    """The describe of a flow that hangs at import runs 5 s before it is given up; the
    worker waiting on it used to hold the exit that long."""
    folder = write_flow(workspace, "hangs", HANGS_WHEN_DESCRIBED)
    write_flow(
        workspace, "fine", "from flowdrop_tui import flow\n\n@flow()\ndef main(run):\n    pass\n"
    )
    tmux = Tmux(tmp_path / "tmux.sock")
    try:
        command = f"{shlex.quote(sys.executable)} -m flowdrop_tui; echo UI-LEFT; sleep 60"
        env_path = shlex.quote(os.environ.get("PATH", ""))
        tmux.start(
            f"env -u COLUMNS -u LINES PATH={env_path} TERM=xterm-256color {command}", workspace
        )
        wait_for(lambda: "fine" in tmux.screen(), timeout=60)
        describing = folder / "describing"
        pid = int(wait_for(lambda: describing.exists() and describing.read_text(), timeout=60))
        tmux.keys("q")
        wait_for(lambda: "UI-LEFT" in tmux.screen(), timeout=60)  # its process has ended
        try:
            os.kill(pid, 0)  # the describe it was waiting on still runs
        except ProcessLookupError:
            pytest.fail("the UI waited for the describe to be given up before it left")
    finally:
        tmux.close()
