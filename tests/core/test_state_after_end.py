"""An ended run's ``state.json`` is never written again (issue 27, item 13): a flow's
leftover thread or ``atexit`` hook setting a key after the run's ``ended`` had rewritten
it. The late saves are refused, said once on stderr, never in the record."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import orjson

from tests.conftest import CLI, write_flow

FLOW = """
import atexit, os, threading, time
from flowdrop_tui import flow

@flow
def main(run):
    s = run.state
    s["n"] = 1
    record = os.path.join(".flowdrop", "runs", run.run_id, "cycle.jsonl")

    def late():  # waits for the run's end, as a leftover worker thread would
        while b'"event":"ended"' not in open(record, "rb").read():
            time.sleep(0.01)
        s["late"] = "thread"

    threading.Thread(target=late).start()  # not a daemon: the process waits for it
    atexit.register(lambda: s.__setitem__("atexit", "hook"))
    return 1
"""


def test_a_leftover_thread_or_atexit_hook_never_rewrites_an_ended_runs_state(
    tmp_path: Path,
) -> None:
    ws = tmp_path / "ws"
    subprocess.run(["git", "init", "-q", str(ws)], check=True)
    (ws / "flows" / "late").mkdir(parents=True)
    (ws / "flows" / "late" / "flow.py").write_text(textwrap.dedent(FLOW))
    done = subprocess.run(
        [sys.executable, "-m", "flowdrop_tui", "run", "late"],
        cwd=ws,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    (run_id,) = os.listdir(ws / ".flowdrop" / "runs")
    run_dir = ws / ".flowdrop" / "runs" / run_id
    assert orjson.loads((run_dir / "state.json").read_bytes()) == {"late": {"n": 1}}
    assert done.stderr.count("never written after its end") == 1, done.stderr
    events = [
        orjson.loads(line)["event"] for line in (run_dir / "cycle.jsonl").read_bytes().splitlines()
    ]
    assert events[-1] == "ended"


def test_a_big_integer_another_tool_wrote_is_read_back_exactly(tmp_path: Path) -> None:
    """Guards against an integer beyond 64 bits in `state.json` (written by another tool)
    read back as a float (orjson's reading): the next run starts from it exactly."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent / "bench"))
    from powercut import FLOW as COUNT

    ws = tmp_path / "ws"
    subprocess.run(["git", "init", "-q", str(ws)], check=True)
    (ws / "flows" / "count").mkdir(parents=True)
    (ws / "flows" / "count" / "flow.py").write_text(textwrap.dedent(COUNT))
    env = {**os.environ, "PC_ROUNDS": "1"}
    cli = [sys.executable, "-m", "flowdrop_tui", "run", "count"]
    first = subprocess.run(cli, cwd=ws, env=env, capture_output=True, text=True, timeout=120)
    assert first.returncode == 0, first.stderr
    (run_id,) = os.listdir(ws / ".flowdrop" / "runs")
    big = 123456789012345678901234567890
    (ws / ".flowdrop" / "runs" / run_id / "state.json").write_text(
        f'{{"count": {{"n": {big}, "half": {big // 2}, "note": "12345678901234567890123"}}}}'
    )
    again = subprocess.run(cli, cwd=ws, env=env, capture_output=True, text=True, timeout=120)
    assert again.returncode == 0, again.stderr
    assert f"start {big}\n" in again.stdout, again.stdout
    assert f"saved {big + 1} round " in again.stdout, again.stdout


def test_a_finished_run_leaves_only_state_json(workspace: Path) -> None:
    """The state writer's spare files are gone once the run has ended."""
    write_flow(
        workspace,
        "f",
        """
        from flowdrop_tui import flow

        @flow()
        def main(run):
            for r in run.rounds(range(5)):
                run.state["r"] = r
    """,
    )
    out = CLI(workspace).json("run", "f")
    folder = workspace / ".flowdrop" / "runs" / out["run"]
    assert sorted(p.name for p in folder.iterdir() if p.is_file()) == [
        "cycle.jsonl",
        "live.lock",
        "output.log",
        "state.json",
    ]
    assert orjson.loads((folder / "state.json").read_bytes()) == {"f": {"r": 4}}
