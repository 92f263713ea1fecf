"""A dead run's ``state.json`` is whole as soon as anything of ours looks (issue 37), and a
person's edit of it is honoured or refused (SPEC §5.1, INT-15) — real runs, real
``kill -9``, the real command line."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from tests.conftest import CLI, wait_for, write_flow

SETS_TWO = """
import os, signal
from flowdrop_tui import flow

@flow(resumable=True)
def main(run):
    s = run.state
    n = s.get("n", 0)
    s["n"] = n + 1
    s["m"] = n + 1  # the second of two quick key sets, then a kill -9 of itself
    os.kill(os.getpid(), signal.SIGKILL)
"""

COUNTS = """
from flowdrop_tui import flow

@flow(resumable=True)
def main(run):
    s = run.state
    print(f"start {s.get('n', 0)}", flush=True)
    s["n"] = s.get("n", 0) + 1
"""


def _runs(ws: Path) -> list[str]:
    return sorted(os.listdir(ws / ".flowdrop" / "runs"))


def _folder(ws: Path, run_id: str) -> Path:
    return ws / ".flowdrop" / "runs" / run_id


def _killed_run(workspace: Path, cli: CLI) -> Path:
    write_flow(workspace, "setter", SETS_TWO)
    done = cli("run", "setter")
    assert done.returncode == -signal.SIGKILL or done.returncode != 0, done
    [run_id] = _runs(workspace)
    return _folder(workspace, run_id)


def test_kill_9_right_after_two_quick_key_sets_leaves_state_json_holding_both(
    workspace: Path, cli: CLI
) -> None:
    """The seed: setting a key writes the file again — read as bytes, by no tool of ours,
    before anything of ours has looked."""
    folder = _killed_run(workspace, cli)
    assert orjson.loads((folder / "state.json").read_bytes()) == {"setter": {"n": 1, "m": 1}}


def test_a_hand_edit_of_a_killed_runs_state_json_is_what_the_next_run_picks_up(
    workspace: Path, cli: CLI
) -> None:
    folder = _killed_run(workspace, cli)
    (folder / "state.json").write_text('{"setter": {"n": 1000000, "m": 0}}\n')
    write_flow(workspace, "setter", COUNTS)
    done = cli("run", "setter", check=0)
    assert "start 1000000" in done.stdout + _output(workspace, done), done
    assert "state.json was edited" in done.stderr, done.stderr
    newest = _runs(workspace)[-1]
    assert orjson.loads((_folder(workspace, newest) / "state.json").read_bytes()) == {
        "setter": {"n": 1000001, "m": 0}
    }


def test_an_invalid_hand_edit_is_refused_and_left_as_it_was(workspace: Path, cli: CLI) -> None:
    folder = _killed_run(workspace, cli)
    broken = b'{"setter": {"n": 5,'
    (folder / "state.json").write_bytes(broken)
    for verb in (("flows",), ("show", folder.name), ("runs", "setter")):
        cli(*verb)  # readers never replace it
        assert (folder / "state.json").read_bytes() == broken
    write_flow(workspace, "setter", COUNTS)
    done = cli("run", "setter")
    assert done.returncode == 3, done
    assert "UNUSABLE_STATE" in cli("run", "setter", "--json").stdout
    assert str(folder / "state.json") in done.stderr, done.stderr
    assert (folder / "state.json").read_bytes() == broken
    assert len(_runs(workspace)) == 1


def test_after_a_power_cut_one_flows_makes_state_json_whole(workspace: Path, cli: CLI) -> None:
    """Issue 37: state.json was 19 NUL bytes after a power cut until something settled the
    run; ``flows`` and ``show`` left it so. The first command now makes it whole."""
    folder = _killed_run(workspace, cli)
    os.utime(folder / "state.log")  # (the log was written after the file, as at a cut)
    (folder / "state.json").write_bytes(b"\0" * 19)
    assert (folder / "state.log").exists()
    cli("flows", check=0)
    assert orjson.loads((folder / "state.json").read_bytes()) == {"setter": {"n": 1, "m": 1}}
    assert not (folder / "state.log").exists()


def _output(ws: Path, done: object) -> str:
    newest = _runs(ws)[-1]
    path = _folder(ws, newest) / "output.log"
    wait_for(path.exists)
    return path.read_text()


BOUND = """
import os, subprocess
from flowdrop_tui import flow

@flow(resumable=True)
def main(run):
    s = run.state
    print(f"start {s.get('n', 0)}", flush=True)
    s["n"] = s.get("n", 0)
    s["pad"] = "p" * 300  # some 200 saves a lap of the log: 1100 go round it five times
    if os.environ.get("BIND_FROM"):  # state.json made impossible to replace
        folder = os.path.join(run.workspace, ".flowdrop", "runs", run.run_id)
        subprocess.run(
            ["mount", "--bind", os.environ["BIND_FROM"], os.path.join(folder, "state.json")],
            check=True,
        )
        with open(os.environ["BIND_FROM"] + ".at", "w") as note:
            note.write(folder)
    for _ in range(1100):
        s["n"] += 1
    print(f"saved {s['n']}", flush=True)
"""


def test_a_run_whose_state_json_cannot_be_replaced_keeps_every_save(
    workspace: Path, cli: CLI, tmp_path: Path
) -> None:
    """Issue 36 item 3, as reported: state.json under a bind mount, a run reaching
    n=1100 kept 360 and said completed, and the next run picked up 360."""
    if os.geteuid() != 0:
        pytest.skip("a bind mount needs root")
    write_flow(workspace, "bound", BOUND)
    source = tmp_path / "elsewhere.json"
    source.write_text('{"bound": {}}')
    env = {**os.environ, "BIND_FROM": str(source)}
    done = subprocess.run(
        [sys.executable, "-m", "flowdrop_tui", "run", "bound"],
        cwd=workspace,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    mounted = Path(str(source) + ".at")
    try:
        assert done.returncode == 0, done.stderr
        assert "saved 1100" in _output(workspace, done)
        assert "state.json not replaced" in done.stderr, done.stderr
        assert "state stays in state.log" in done.stderr, done.stderr
        assert "not saved" not in done.stderr, done.stderr
        [run_id] = _runs(workspace)
        shown = cli.json("show", run_id)
        assert shown["state"]["bound"]["n"] == 1100, shown["state"]
    finally:
        if mounted.exists():
            subprocess.run(["umount", str(Path(mounted.read_text()) / "state.json")], check=True)
    again = cli("run", "bound", check=0)
    assert "start 1100" in _output(workspace, again), again
    assert (
        orjson.loads((_folder(workspace, run_id) / "state.json").read_bytes())["bound"]["n"] == 1100
    )
