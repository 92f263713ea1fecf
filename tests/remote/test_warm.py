"""A worker's warm run process (``core/remote/daemon/warm.py``): the run child of the next
start, loaded ahead of it. Local workspaces here: what is tested is that the warm
process becomes exactly the child a cold start makes (its workspace, its path, the
environment the start gives, the handshake), and when it must not be used."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import orjson

from flowdrop_tui.core.control.launch import launch_process
from flowdrop_tui.core.paths import Layout
from flowdrop_tui.core.remote.daemon.warm import WarmChild
from tests.conftest import wait_for, write_flow

# The flow says where it runs, what it sees, and what process it is.
LOOKS = """
import os, sys
from pathlib import Path
from flowdrop_tui import flow
import helper  # a module beside the workspace's root, found as a cold child finds it

@flow
def main(run):
    for r in run.rounds(range(1)):
        run.state["seen"] = {
            "cwd": os.getcwd(),
            "path": sys.path,
            "given": os.environ.get("GIVEN"),
            "spawned": os.environ.get("SPAWNED"),
            "initial": Path("/proc/self/environ").read_bytes().decode(errors="replace"),
            "cmdline": Path("/proc/self/cmdline").read_bytes().decode(errors="replace"),
            "stdin": sys.stdin.read(),
            "pid": os.getpid(),
            "helper": helper.VALUE,
        }
"""


def _state(ws: Path, run: str) -> dict[str, object]:
    def saved() -> dict[str, object] | None:
        path = ws / ".flowdrop" / "runs" / run / "state.json"
        try:
            seen = orjson.loads(path.read_bytes()).get("looks", {}).get("seen")
        except (OSError, orjson.JSONDecodeError):
            return None
        return seen if isinstance(seen, dict) else None

    found: dict[str, object] = wait_for(saved, timeout=60)
    return found


def test_a_warm_process_becomes_the_run_child_a_cold_start_would_make(
    workspace: Path, tmp_path: Path
) -> None:
    """Guards against a warm start differing from a cold one: another folder or import
    path, the spawn's environment instead of the start's, a stdin to read from."""
    write_flow(workspace, "looks", LOOKS)
    (workspace / "helper.py").write_text("VALUE = 42\n")
    base = {**os.environ, "SPAWNED": "at spawn"}
    warm = WarmChild(tmp_path / "warm")
    warm.prepare(base)
    ready = warm._ready
    assert ready is not None
    env = {**base, "GIVEN": "by the start"}
    env.pop("SPAWNED")
    message, child = warm.launch(Layout(workspace), ["run", "looks"], env=env, base=base)
    assert child.pid == ready.child.pid  # the warm process, not a new one
    seen = _state(workspace, str(message["run"]))
    assert child.wait(timeout=60) == 0
    cold_message, cold = launch_process(Layout(workspace), ["run", "looks"], env=env)
    cold_seen = _state(workspace, str(cold_message["run"]))
    assert cold.wait(timeout=60) == 0
    assert seen["cwd"] == cold_seen["cwd"] == str(workspace)
    assert seen["path"] == cold_seen["path"]  # the import path a cold child has
    assert seen["helper"] == 42
    assert seen["given"] == "by the start" and seen["spawned"] is None
    assert "GIVEN=" not in str(seen["initial"])  # /proc shows the spawn's environment
    assert "flowdrop_tui.warm_run" in str(seen["cmdline"])
    assert seen["stdin"] == "" and seen["pid"] == child.pid
    assert warm._ready is None  # taken: the next one is the worker's to start
    warm.close()


def test_a_warm_process_for_another_environment_or_dead_is_not_used(
    workspace: Path, tmp_path: Path
) -> None:
    """Guards against a run given an environment it was not started for (the worker's
    settings changed) or hanging on a warm process that died: the start is cold."""
    write_flow(workspace, "looks", LOOKS)
    (workspace / "helper.py").write_text("VALUE = 1\n")
    base = dict(os.environ)
    warm = WarmChild(tmp_path / "warm")
    warm.prepare({**base, "OTHER": "1"})
    stale = warm._ready
    assert stale is not None
    message, child = warm.launch(Layout(workspace), ["run", "looks"], env=base, base=base)
    assert child.pid != stale.child.pid and stale.child.poll() is not None  # ended
    _state(workspace, str(message["run"]))
    child.wait(timeout=60)
    warm.prepare(base)
    dead = warm._ready
    assert dead is not None
    dead.child.kill()
    dead.child.wait(timeout=10)
    message, child = warm.launch(Layout(workspace), ["run", "looks"], env=base, base=base)
    assert child.pid != dead.child.pid
    _state(workspace, str(message["run"]))
    child.wait(timeout=60)
    warm.close()


def test_an_untaken_warm_process_ends_with_its_worker_or_its_close(tmp_path: Path) -> None:
    """Guards against warm processes outliving the worker that kept them (each leads
    its own session, as a run does, so a worker's group kill does not reach it)."""
    warm = WarmChild(tmp_path / "warm")
    warm.prepare(dict(os.environ))
    ready = warm._ready
    assert ready is not None
    warm.close()
    assert ready.child.poll() is not None
    warm.prepare(dict(os.environ))
    assert warm._ready is None  # closed: no more
    # Its worker gone (stdin at its end, nothing given): it exits 0 having done nothing.
    alone = subprocess.run(
        [sys.executable, "-m", "flowdrop_tui.warm_run"],
        input=b"",
        capture_output=True,
        cwd=tmp_path,
        timeout=60,
    )
    assert alone.returncode == 0 and alone.stdout == b"" and alone.stderr == b""
