"""``.flowdrop/limits.json`` is read as every record file is (SPEC §19; issue 36 item 4):
whatever is planted there, nothing about waiting hangs a run, grows it, or fails it.

Real runs of a flow whose session is a real command (``command`` sessions wait on
their backend's window like any other, so no agent CLI is needed here).
"""

from __future__ import annotations

import os
import resource
import stat
import subprocess
import sys
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import orjson
import pytest

from tests.conftest import CLI, events, state_of

FLOW = """
from flowdrop_tui import flow

@flow()
def main(run):
    for n in run.rounds():
        result = run.session("command", ["echo", "hello"])
        run.state["said"] = result.text.strip()
        break
"""


def limits(workspace: Path) -> Path:
    folder = workspace / ".flowdrop"
    folder.mkdir(exist_ok=True)
    return folder / "limits.json"


def window(workspace: Path, **fields: Any) -> None:
    body = {"version": 1, "windows": {"command": {"probes": 1, "source": "result", **fields}}}
    limits(workspace).write_bytes(orjson.dumps(body))


def iso(when: datetime) -> str:
    return when.isoformat().replace("+00:00", "Z")


def run_capped(
    workspace: Path, *args: str, timeout: float = 90
) -> subprocess.CompletedProcess[str]:
    """``flowdrop-tui`` with its address space capped at 3 GB: a reader that grows
    without end fails with MemoryError instead of taking the machine."""

    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))

    return subprocess.run(
        [sys.executable, "-m", "flowdrop_tui", *args],
        cwd=workspace,
        capture_output=True,
        text=True,
        timeout=timeout,
        preexec_fn=cap,
    )


def last_run(cli: CLI) -> str:
    return str(cli.json("runs", "agent")[0]["run"])


def completed(cli: CLI, workspace: Path) -> str:
    run_id = last_run(cli)
    assert cli.json("show", run_id)["status"] == "completed"
    assert state_of(workspace, run_id)["agent"]["said"] == "hello"
    return run_id


def test_a_fifo_at_limits_json_neither_hangs_nor_fails_a_run(
    cli: CLI, workspace: Path, flow_writer: Callable[[str, str], Path]
) -> None:
    """A plain open of a FIFO waits for a writer that never comes: every session of
    the workspace hung before its first call."""
    flow_writer("agent", FLOW)
    os.mkfifo(limits(workspace))
    done = cli("run", "agent", timeout=60)
    assert done.returncode == 0, done.stderr
    run_id = completed(cli, workspace)
    warned = [e for e in events(workspace, run_id) if e["event"] == "warning"]
    assert any("not a regular file" in e["message"] for e in warned), warned
    assert stat.S_ISFIFO(os.lstat(limits(workspace)).st_mode)  # read, never replaced by a read


@pytest.mark.parametrize("planted", ["device", "link"])
def test_a_device_at_limits_json_is_not_read(
    cli: CLI, workspace: Path, flow_writer: Callable[[str, str], Path], planted: str
) -> None:
    """/dev/zero there (a device node, or a link to it) read without end grew a run to
    24 GB until the OOM killer took it; the run here is capped at 3 GB of address space."""
    flow_writer("agent", FLOW)
    path = limits(workspace)
    if planted == "device":
        zero = os.stat("/dev/zero").st_rdev
        try:
            os.mknod(path, stat.S_IFCHR | 0o666, zero)
        except PermissionError:
            pytest.skip("making a device node needs root (CAP_MKNOD)")
    else:
        path.symlink_to("/dev/zero")
    done = run_capped(workspace, "run", "agent")
    assert done.returncode == 0, done.stderr[-3000:]
    completed(cli, workspace)


@pytest.mark.parametrize(
    "fields",
    [
        {"since": "2026-01-01T00:00:00Z", "until": "9999-12-31T23:59:59Z"},
        {"since": "9999-12-31T23:59:59.999Z", "until": None},
        {"since": "2026-01-01T00:00:00Z", "until": None, "next_probe": "9999-12-31T23:59:59Z"},
    ],
    ids=["until-9999", "since-9999", "next-probe-9999"],
)
def test_a_year_9999_window_pauses_the_run_instead_of_failing_it(
    cli: CLI, workspace: Path, flow_writer: Callable[[str, str], Path], fields: dict[str, Any]
) -> None:
    """``until`` in year 9999 made every session raise OverflowError (the reset plus a
    second's margin is past what a datetime holds) and failed every run. A time more
    than 366 days ahead is implausible: held to that, and the run pauses at once
    (``limit_reached``) instead of waiting — `resume` meets it again."""
    flow_writer("agent", FLOW)
    window(workspace, **fields)
    done = cli("run", "agent", timeout=60)
    assert "OverflowError" not in done.stderr and "Traceback" not in done.stderr, done.stderr
    run_id = last_run(cli)
    detail = cli.json("show", run_id)
    assert detail["status"] == "paused", (detail["status"], done.stderr)
    reached = detail["limit_reached"]
    assert reached["backend"] == "command"
    shown = reached["until"] or reached["next_probe"]
    if shown is not None:  # a start with neither: no time to show
        ahead = datetime.fromisoformat(shown.replace("Z", "+00:00")) - datetime.now(UTC)
        assert timedelta(days=365) < ahead <= timedelta(days=366)


def test_a_window_with_a_far_start_and_no_end_pauses_instead_of_waiting(
    cli: CLI, workspace: Path, flow_writer: Callable[[str, str], Path]
) -> None:
    """A window starting two days from now with no reset and no probe time opens then:
    a wait longer than the run's limit_wait (12 h) pauses the run at once, as any such
    wait does — it used to wait the whole 12 h first."""
    flow_writer("agent", FLOW)
    window(workspace, since=iso(datetime.now(UTC) + timedelta(days=2)), until=None)
    done = cli("run", "agent", timeout=60)
    assert done.returncode == 0, done.stderr
    detail = cli.json("show", last_run(cli))
    assert detail["status"] == "paused"
    assert detail["limit_reached"]["limit_wait"] == 12 * 3600


@pytest.mark.parametrize(
    "body",
    [
        b"\x00\xff not json",
        b"[]",
        b'{"windows": []}',
        b'{"windows": {"command": {"since": 12, "until": "garbage"}}}',
        b'{"windows": {"command": {"since": "0001-01-01T00:00:00+14:00",'
        b' "until": "0001-01-01T00:00:00Z"}}}',
        b'{"windows": {"command": {"since": "2026-01-01T00:00:00Z", "until": "garbage"}}}',
        b" " * (1 << 20) + b"{}",
    ],
    ids=["binary", "list", "windows-list", "garbage-times", "year-1", "until-garbage", "big"],
)
def test_garbage_at_limits_json_never_fails_a_run(
    cli: CLI, workspace: Path, flow_writer: Callable[[str, str], Path], body: bytes
) -> None:
    flow_writer("agent", FLOW)
    limits(workspace).write_bytes(body)
    done = cli("run", "agent", timeout=60)
    assert done.returncode == 0, done.stderr
    completed(cli, workspace)
