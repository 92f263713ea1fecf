"""Issue 35 item 4: a reader that stops reading (``runs --json | head -c 10``) gets no
traceback and no complaint, and the command's status is what it would have been; a
failing flow's traceback starts at the flow's own frame — real processes."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from tests.conftest import CLI

RAISES = """
    from flowdrop_tui import flow

    def deeper(n):
        raise ValueError(f"bad round {n}")

    @flow
    def main(run):
        for n in run.rounds():
            deeper(n)
"""
BIG_STATE = """
    from flowdrop_tui import flow

    @flow
    def main(run):
        for n in run.rounds(range(1)):
            run.state["blob"] = ["x" * 100] * 2000
"""


def into_closed_pipe(ws: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    """``flowdrop-tui ARGS`` with its stdout a pipe whose reader has already gone."""
    read, write = os.pipe()
    os.close(read)
    try:
        return subprocess.run(
            [sys.executable, "-m", "flowdrop_tui", *args],
            cwd=ws,
            stdout=write,
            stderr=subprocess.PIPE,
            timeout=60,
        )
    finally:
        os.close(write)


def into_head(ws: Path, *args: str) -> tuple[int, bytes, bytes]:
    """``flowdrop-tui ARGS | head -c 10``: the first 10 bytes read, then the pipe closed."""
    child = subprocess.Popen(
        [sys.executable, "-m", "flowdrop_tui", *args],
        cwd=ws,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert child.stdout is not None and child.stderr is not None
    first = child.stdout.read(10)
    child.stdout.close()
    said = child.stderr.read()
    return child.wait(timeout=60), first, said


def test_json_into_a_closed_pipe_exits_quietly_with_its_own_status(
    workspace: Path, cli: CLI, flow_writer: Callable[[str, str], Path]
) -> None:
    """An error's JSON (``--limit 0``: exit 2) into a closed pipe was a BrokenPipeError
    traceback and exit 1; a run's ``--json`` answer said "could not write to standard
    output (Broken pipe)"."""
    refused = into_closed_pipe(workspace, "runs", "--json", "--limit", "0")
    assert refused.returncode == 2, refused.stderr
    assert b"Traceback" not in refused.stderr and b"BrokenPipe" not in refused.stderr
    flow_writer("big", BIG_STATE)
    ran = into_closed_pipe(workspace, "run", "big", "--json")
    assert ran.returncode == 0, ran.stderr
    assert b"standard output" not in ran.stderr and b"Traceback" not in ran.stderr
    # ``show RUN --json | head -c 10`` of an answer bigger than a pipe holds: 0, quiet
    run_id = str(cli.json("runs")[0]["run"])
    for args in (("show", run_id, "--json"), ("runs", "--json")):
        status, first, said = into_head(workspace, *args)
        assert (status, said) == (0, b""), (args, said)
        assert first.startswith((b"{", b"["))


def test_a_failing_flows_traceback_starts_at_the_flows_own_frame(
    workspace: Path, cli: CLI, flow_writer: Callable[[str, str], Path]
) -> None:
    """On stderr of a foreground run and in ``logs``, the first frame was
    ``flowdrop_tui/core/run/execution.py``'s; now it is the flow's, and the frames below
    it (the flow's own ``deeper``) are all there."""
    flow = flow_writer("raises", RAISES)
    done = cli("run", "raises", check=1)
    run_id = str(cli.json("runs")[0]["run"])
    logged = cli("logs", run_id, check=0).stdout
    for text in (done.stderr, logged):
        tail = text.split("Traceback (most recent call last):\n", 1)[1]
        frames = [line for line in tail.splitlines() if line.startswith("  File ")]
        first = frames[0]
        assert first.startswith(f'  File "{flow / "flow.py"}"') and first.endswith("main"), text
        assert frames[1].endswith("in deeper"), text
        assert "flowdrop_tui" not in tail.split("ValueError: bad round 1")[0], text
