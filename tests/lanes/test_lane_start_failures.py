"""A lane that cannot be made ready (SPEC §23): its run exists first, so a git failure
or a failing ``setup`` ends that run ``failed`` in one line, and the next run tries again;
a setup that succeeds runs once, its output in the run's output.log."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import CLI
from tests.lanes.conftest import COUNTER, commit_flow, events, runs_of, unknown_to_records

ONE_ROUND = """
from flowdrop_tui import flow

@flow(resumable=True, setup={setup!r})
def main(run):
    for _ in run.rounds(range(1)):
        print("round", run.round)
"""


def failed_once(cli: CLI, key: str, words: str) -> dict[str, object]:
    done = cli("run", key, check=1)
    said = done.stderr.strip().splitlines()
    assert "Traceback" not in done.stderr and len(said) == 2, done.stderr  # start, end
    assert said[-1].startswith("run ") and " failed (no rounds): " in said[-1], said
    assert words in said[-1], said
    run = runs_of(cli, key)[0]
    assert run["status"] == "failed"
    return run


def test_a_worktree_git_cannot_make_fails_the_run_and_the_next_run_makes_it(
    workspace: Path, lanes_dir: Path, cli: CLI
) -> None:
    commit_flow(workspace, "count", COUNTER)
    place = lanes_dir / "count" / "1"
    place.mkdir(parents=True)
    (place / "someone's.txt").write_text("not a worktree\n")
    run = failed_once(cli, "count@1", "holds files that are not a worktree")
    ended = events(workspace, str(run["run"]))[-1]
    assert ended["event"] == "ended" and ended["outcome"] == "failed"
    assert ended["error"]["code"] == "GIT_FAILED"
    (place / "someone's.txt").unlink()
    assert "completed (rounds 1–3)" in cli("run", "count@1", check=0).stderr
    (lanes_dir / "other").write_text("a file where the flow's lanes folder goes\n")
    commit_flow(workspace, "other", COUNTER)
    failed_once(cli, "other@1", "could not make lane other@1's worktree")
    assert unknown_to_records(workspace) == (set(), set())


def test_setup_runs_once_in_a_new_worktree(workspace: Path, lanes_dir: Path, cli: CLI) -> None:
    setup = ["sh", "-c", "echo setting up; echo once >> set-up.txt"]
    commit_flow(workspace, "built", ONE_ROUND.format(setup=setup))
    cli("run", "built@1", check=0)
    cli("run", "built@1", check=0)
    first, second = reversed(runs_of(cli, "built@1"))
    done = [e for e in events(workspace, str(first["run"])) if e["event"] == "lane_setup"]
    assert len(done) == 1 and done[0]["command"] == setup and done[0]["exit"] == 0
    assert isinstance(done[0]["seconds"], float | int)
    assert not [e for e in events(workspace, str(second["run"])) if e["event"] == "lane_setup"]
    assert (lanes_dir / "built" / "1" / "set-up.txt").read_text() == "once\n"
    log = cli("logs", str(first["run"]), check=0).stdout
    assert "setting up" in log and log.index("setting up") < log.index("round 1")
    assert not (workspace / "set-up.txt").exists()


def test_a_failing_setup_fails_the_run_naming_it_and_runs_again_next_time(
    workspace: Path, lanes_dir: Path, cli: CLI
) -> None:
    gate = workspace.parent / "setup-may-pass"
    commit_flow(workspace, "built", ONE_ROUND.format(setup=["sh", "-c", f"test -f {gate}"]))
    run = failed_once(cli, "built@1", f"the lane's setup 'sh -c test -f {gate}' exited with 1")
    setup = [e for e in events(workspace, str(run["run"])) if e["event"] == "lane_setup"]
    assert setup[0]["exit"] == 1
    gate.write_text("")
    assert "completed (rounds 1)" in cli("run", "built@1", check=0).stderr
    commit_flow(workspace, "lost", ONE_ROUND.format(setup=["no-such-command-here"]))
    run = failed_once(cli, "lost@1", "'no-such-command-here' could not start")
    setup = [e for e in events(workspace, str(run["run"])) if e["event"] == "lane_setup"]
    assert setup[0]["exit"] is None
