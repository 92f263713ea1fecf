"""A lane's worktree made ready before its run's first round (SPEC §23).

Its run's record exists first (its ``created`` event names the lane), so whatever
fails here — git making the worktree, the flow's ``setup`` command — ends that run
``failed`` with the reason, never a record left pending: ``LaneNotReady`` carries the
error the run's ``ended`` event records. The lane's next run tries again.

``setup`` (``@flow(setup=[...])``: one command, no shell) runs in the worktree until it
has once succeeded there: a marker in the worktree's own git folder says so, so a
setup killed or failed runs again next time, and a worktree made again (its git
folder new) is set up again."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path
from typing import Any, TextIO

from flowdrop_tui.core import git
from flowdrop_tui.core.errors import FlowdropError
from flowdrop_tui.core.lanes import lane_trees
from flowdrop_tui.core.lanes.place import Lane, checked_out_here
from flowdrop_tui.core.paths import Layout
from flowdrop_tui.core.records.log.event_log import EventLog

SET_UP = "flowdrop-setup-done"  # in the worktree's own git folder, once setup succeeded


class LaneNotReady(Exception):
    """The lane could not be made ready: ``error`` is its run's ``ended`` error."""

    def __init__(self, error: dict[str, Any]) -> None:
        super().__init__(error.get("message"))
        self.error = error


def prepare(
    layout: Layout, lane: Lane, setup: tuple[str, ...], log: EventLog, output: TextIO
) -> Path:
    """Make the lane's worktree (when missing) and run ``setup`` there when owed; its
    path. Raises ``LaneNotReady`` naming what failed."""
    try:  # on a worker the run's checkout is the lane's already (SPEC §23, remote)
        tree = layout.checkout if checked_out_here(lane) else lane_trees.ensure(layout, lane)
    except FlowdropError as exc:
        raise LaneNotReady(
            {"type": type(exc).__name__, "code": exc.code, "message": exc.message}
        ) from exc
    except OSError as exc:  # the lanes dir unwritable, say
        raise LaneNotReady(
            {"type": "OSError", "message": f"could not make lane {lane.key}'s worktree: {exc}"}
        ) from exc
    marker = _marker(tree)
    if setup and (marker is None or not marker.exists()):
        _run_setup(tree, setup, log, output)
        if marker is not None:
            marker.touch()
    return tree


def _marker(tree: Path) -> Path | None:
    dirs = git.git_dirs(tree)
    return dirs[0] / SET_UP if dirs is not None else None


def _run_setup(tree: Path, setup: tuple[str, ...], log: EventLog, output: TextIO) -> None:
    command = list(setup)
    words = " ".join(command)
    output.write(f"lane setup: {words}\n")
    output.flush()
    began = time.monotonic()
    try:
        done = subprocess.run(
            command,
            cwd=tree,
            stdin=subprocess.DEVNULL,
            stdout=output.fileno(),
            stderr=subprocess.STDOUT,
            check=False,
        )
        status: int | None = done.returncode
        why = f"exited with {status}" if status != 0 else ""
    except OSError as exc:  # not found, not executable
        status, why = None, f"could not start: {exc.strerror or exc}"
    seconds = round(time.monotonic() - began, 3)
    log.append("lane_setup", command=command, exit=status, seconds=seconds)
    if status != 0:
        raise LaneNotReady(
            {"type": "LaneSetup", "message": f"the lane's setup {words!r} {why}", "exit": status}
        )
