"""SPEC §20: a loop that spins pauses (``stalled``, ``same_failure``), counted along the
pick-up chain through kill -9, reset by a person's resume; ``diff`` shows what a round
changed. Real runs of the real CLI in real git repositories. A plain loop is stalled
only when it opts in (``stall_on="all"``): most loops here do, to test the mechanism;
what counts by default is tests/core/test_stall_scope.py's."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

from tests.conftest import CLI, events, wait_for, write_flow


def ran(ws: Path, run_id: str) -> list[int]:
    return [e["round"] for e in events(ws, run_id) if e["event"] == "round_started"]


def named(ws: Path, run_id: str, event: str) -> list[dict[str, Any]]:
    return [e for e in events(ws, run_id) if e["event"] == event]


def only_run(cli: CLI) -> str:
    rows = cli.json("runs")
    return str(rows[0]["run"])


SPINS = """
from flowdrop_tui import flow

@flow(resumable=True)
def main(run):
    for n in run.rounds():
        pass
"""
SPINS_ALL = SPINS.replace("@flow(resumable=True)", '@flow(resumable=True, stall_on="all")')

FAILS = """
from flowdrop_tui import flow

@flow(resumable=True)
def main(run):
    for n in run.rounds():
        result = run.session("command", ["sh", "-c", "echo 'no such model' >&2; exit 3"])
        assert not result.ok
"""


def test_a_loop_that_changes_nothing_pauses_after_exactly_five_rounds(
    workspace: Path, cli: CLI
) -> None:
    write_flow(workspace, "spin", SPINS_ALL)
    done = cli("run", "spin", check=0)
    run_id = only_run(cli)
    assert ran(workspace, run_id) == [1, 2, 3, 4, 5]
    (stalled,) = named(workspace, run_id, "stalled")
    assert stalled["rounds"] == [1, 2, 3, 4, 5]
    assert stalled["compared"] == ["head", "tree", "state", "progress"]
    assert stalled["limit"] == 5
    shown = cli.json("show", run_id)
    assert shown["status"] == "paused"
    assert shown["paused_by"] == {
        "kind": "stalled",
        "rounds": [1, 2, 3, 4, 5],
        "limit": 5,
        "compared": ["head", "tree", "state", "progress"],
    }
    assert "stalled: 5 rounds without a change" in done.stderr
    assert cli.json("runs")[0]["paused_by"]["kind"] == "stalled"
    assert "paused — stalled: 5 rounds without a change" in cli("runs", check=0).stdout
    assert "stalled: 5 rounds without a change" in cli("show", run_id, check=0).stdout
    # every round recorded what moved, and what it started from
    for ended in named(workspace, run_id, "round_ended"):
        moved = ended["moved"]
        assert set(moved) >= {"head", "tree", "state", "progress", "changed", "sessions"}
        assert moved["changed"] == [] and moved["counted"] is True
    assert all(isinstance(e["head"], str) for e in named(workspace, run_id, "round_started"))


def test_sessions_failing_the_same_way_pause_after_exactly_five_rounds(
    workspace: Path, cli: CLI
) -> None:
    write_flow(workspace, "fails", FAILS)
    done = cli("run", "fails", check=0)
    run_id = only_run(cli)
    assert ran(workspace, run_id) == [1, 2, 3, 4, 5]
    (same,) = named(workspace, run_id, "same_failure")
    assert same["rounds"] == [1, 2, 3, 4, 5]
    assert same["exit_code"] == 3
    # the command reports no error of its own: its last words name the failure
    assert same["error"] == "no such model"
    assert not named(workspace, run_id, "stalled")  # the more telling reason is given
    paused_by = cli.json("show", run_id)["paused_by"]
    assert paused_by["kind"] == "same_failure"
    assert paused_by["rounds"] == [1, 2, 3, 4, 5]
    assert paused_by["error"] == "no such model"
    assert "same failure 5 rounds in a row: no such model" in done.stderr
    assert "same failure 5 rounds in a row: no such model" in cli("runs", check=0).stdout
    (item,) = [i for i in cli.json("inbox") if i["run"] == run_id]
    assert item["kind"] == "same_failure" and item["message"].endswith(": no such model")


def test_a_same_failure_pause_names_the_last_failed_sessions_words_in_its_notice(
    workspace: Path, cli: CLI, tmp_path: Path
) -> None:
    """Issue 35: `same_failure` said only `exit 2` for a failing `make check`; the pause,
    the inbox item and the notice carry the tail (300 characters) of what the last failed
    session printed, so a person sees why without opening the record."""
    out = tmp_path / "notices.jsonl"
    sink = "import sys; open(sys.argv[1], 'a').write(sys.stdin.read().strip() + '\\n')"
    command = orjson.dumps([sys.executable, "-c", sink, str(out)]).decode()
    (workspace / ".flowdrop").mkdir(exist_ok=True)
    (workspace / ".flowdrop" / "config.toml").write_text(f"[notify]\ncommand = {command}\n")
    write_flow(
        workspace,
        "check",
        """
        from flowdrop_tui import flow

        @flow(resumable=True)
        def main(run):
            for n in run.rounds():
                script = "echo compiling; echo " + "x" * 400
                script += "; echo \'widget.c:12: error: expected ;\' >&2; exit 2"
                run.session("command", ["sh", "-c", script])
        """,
    )
    cli("run", "check", check=0)
    run_id = only_run(cli)
    error = cli.json("show", run_id)["paused_by"]["error"]
    assert error.endswith("widget.c:12: error: expected ;") and 250 < len(error) <= 300
    (item,) = [i for i in cli.json("inbox") if i["run"] == run_id]
    assert item["message"].endswith("widget.c:12: error: expected ;")

    def notice() -> dict[str, Any] | None:
        if not out.exists():
            return None
        lines = [orjson.loads(line) for line in out.read_bytes().splitlines() if line.strip()]
        return next((n for n in lines if n["kind"] == "same_failure"), None)

    said = wait_for(notice, 30)
    assert said["run"] == run_id and said["message"].endswith("widget.c:12: error: expected ;")


def test_a_round_without_a_failed_session_breaks_the_same_failure_streak(
    workspace: Path, cli: CLI
) -> None:
    """Failing every round but the fourth: the streak begins again at round 5, and the
    state moving every round keeps it from stalling — it runs its 9 rounds."""
    write_flow(
        workspace,
        "mostly",
        """
        from flowdrop_tui import flow

        @flow(resumable=True)
        def main(run):
            for n in run.rounds(range(9)):
                run.state["n"] = n
                code = 0 if n == 3 else 3
                run.session("command", ["sh", "-c", f"echo boom >&2; exit {code}"])
        """,
    )
    cli("run", "mostly", check=0)
    run_id = only_run(cli)
    assert ran(workspace, run_id) == list(range(1, 10))
    assert cli.json("show", run_id)["status"] == "completed"
    assert not named(workspace, run_id, "same_failure")


def test_a_loop_that_commits_every_round_is_never_stalled(workspace: Path, cli: CLI) -> None:
    """Its state never changes and it leaves nothing uncommitted: only HEAD moves."""
    write_flow(
        workspace,
        "commits",
        """
        import subprocess
        from flowdrop_tui import flow

        @flow(resumable=True, stall_on="all")
        def main(run):
            for n in run.rounds(range(9)):
                name = f"file{run.round}.txt"
                (run.workspace / name).write_text(f"round {run.round}\\n")
                git = ["git", "-c", "user.name=t", "-c", "user.email=t@t"]
                subprocess.run([*git, "add", name], cwd=run.workspace, check=True)
                subprocess.run([*git, "commit", "-qm", name], cwd=run.workspace, check=True)
        """,
    )
    cli("run", "commits", check=0)
    run_id = only_run(cli)
    assert ran(workspace, run_id) == list(range(1, 10))
    assert cli.json("show", run_id)["status"] == "completed"
    assert not named(workspace, run_id, "stalled")
    changed = [e["moved"]["changed"] for e in named(workspace, run_id, "round_ended")]
    assert all("head" in c for c in changed)


def test_a_loop_that_progresses_runs_to_its_end(workspace: Path, cli: CLI) -> None:
    write_flow(
        workspace,
        "counts",
        """
        from flowdrop_tui import flow

        @flow(resumable=True)
        def main(run):
            for n in run.rounds(range(12)):
                run.state["n"] = n
            return run.state["n"]
        """,
    )
    cli("run", "counts", check=0)
    run_id = only_run(cli)
    shown = cli.json("show", run_id)
    assert (shown["status"], shown["result"], shown["rounds"]) == ("completed", 11, 12)
    assert shown["paused_by"] is None


POLLS = """
from flowdrop_tui import flow

@flow(resumable=True, stall_on="all")
def main(run):
    for n in run.rounds(range(12)):
        run.progress(VALUE)
"""


def test_a_polling_flow_that_declares_moving_progress_is_never_stalled(
    workspace: Path, cli: CLI
) -> None:
    write_flow(workspace, "polls", POLLS.replace("VALUE", "{'queue': 100 - n}"))
    cli("run", "polls", check=0)
    run_id = only_run(cli)
    assert cli.json("show", run_id)["status"] == "completed"
    assert ran(workspace, run_id) == list(range(1, 13))
    ended = named(workspace, run_id, "round_ended")
    assert [e["progress"] for e in ended][:2] == [{"queue": 100}, {"queue": 99}]
    assert all(e["moved"]["changed"] == ["progress"] for e in ended[1:])


def test_a_polling_flow_whose_progress_stands_still_pauses(workspace: Path, cli: CLI) -> None:
    """The control for the test above: the same flow declaring the same value each
    round stalls (its first round declares it: that is a change)."""
    write_flow(workspace, "polls", POLLS.replace("VALUE", "'waiting'"))
    cli("run", "polls", check=0)
    run_id = only_run(cli)
    assert ran(workspace, run_id) == [1, 2, 3, 4, 5, 6]
    assert named(workspace, run_id, "stalled")[0]["rounds"] == [2, 3, 4, 5, 6]


def test_the_streak_survives_kill_9_and_a_pick_up(
    workspace: Path, cli: CLI, tmp_path: Path
) -> None:
    """Rounds 1–2 change nothing, round 3 is killed mid-way; the pick-up's rounds 4, 5
    and 6 change nothing: five in a row along the chain, so it pauses after three."""
    gate = tmp_path / "hold"  # outside the workspace: the gate is no change of its tree
    gate.write_text("")
    write_flow(
        workspace,
        "held",
        f"""
        import os, time
        from flowdrop_tui import flow

        @flow(resumable=True, stall_on="all")
        def main(run):
            for n in run.rounds():
                while n == 3 and os.path.exists({str(gate)!r}):
                    time.sleep(0.02)
        """,
    )
    first = str(cli.json("run", "held", "--detach")["run"])
    wait_for(lambda: 3 in ran(workspace, first))
    created = named(workspace, first, "created")[0]
    os.killpg(created["pgid"], signal.SIGKILL)
    wait_for(lambda: cli.json("show", first)["status"] == "interrupted")
    gate.unlink()
    cli("run", "held", check=0)
    second = only_run(cli)
    assert second != first
    assert ran(workspace, second) == [4, 5, 6]
    (stalled,) = named(workspace, second, "stalled")
    assert stalled["rounds"] == [1, 2, 4, 5, 6]
    assert named(workspace, second, "created")[0]["progress"]["unchanged"] == [1, 2]


def test_a_persons_resume_begins_the_streak_again(workspace: Path, cli: CLI) -> None:
    write_flow(workspace, "spin", SPINS_ALL)
    cli("run", "spin", check=0)
    run_id = only_run(cli)
    assert ran(workspace, run_id) == [1, 2, 3, 4, 5]
    cli("resume", run_id, check=0)
    assert ran(workspace, run_id) == list(range(1, 11))  # five more, not none
    stalled = named(workspace, run_id, "stalled")
    assert [s["rounds"] for s in stalled] == [[1, 2, 3, 4, 5], [6, 7, 8, 9, 10]]
    assert cli.json("show", run_id)["paused_by"]["rounds"] == [6, 7, 8, 9, 10]


def test_stall_none_never_pauses_and_stall_n_counts_n(workspace: Path, cli: CLI) -> None:
    write_flow(
        workspace,
        "off",
        """
        from flowdrop_tui import flow

        @flow(resumable=True, stall=None)
        def main(run):
            for n in run.rounds(range(14)):
                run.session("command", ["false"])
        """,
    )
    cli("run", "off", check=0)
    run_id = only_run(cli)
    assert cli.json("show", run_id)["status"] == "completed"
    assert ran(workspace, run_id) == list(range(1, 15))
    assert not named(workspace, run_id, "stalled")
    assert not named(workspace, run_id, "same_failure")
    write_flow(
        workspace, "two", SPINS.replace("@flow(resumable=True)", '@flow(stall=2, stall_on="all")')
    )
    cli("run", "two", check=0)
    two = cli.json("runs", "two")[0]["run"]
    assert ran(workspace, two) == [1, 2]


@pytest.mark.parametrize("value", ["0", "-1", "'5'", "2.5", "True"])
def test_a_bad_stall_is_refused_naming_it(workspace: Path, cli: CLI, value: str) -> None:
    write_flow(workspace, "bad", SPINS.replace("@flow(resumable=True)", f"@flow(stall={value})"))
    done = cli("run", "bad", check=1)
    assert "@flow(stall=...) takes a whole number of rounds" in done.stderr
    assert "Traceback" not in done.stderr


def test_outside_git_the_state_and_progress_are_compared(tmp_path: Path) -> None:
    ws = tmp_path / "plain"
    write_flow(ws, "spin", SPINS_ALL)
    cli = CLI(ws)
    cli("run", "spin", check=0)
    run_id = only_run(cli)
    (stalled,) = named(ws, run_id, "stalled")
    assert stalled["compared"] == ["state", "progress"]
    assert stalled["rounds"] == [1, 2, 3, 4, 5]
    ended = named(ws, run_id, "round_ended")[0]
    assert ended["moved"]["head"] is None and ended["moved"]["tree"] is None
    done = cli("diff", run_id, check=3)
    assert "is not a git repository" in done.stderr
    assert cli.json("diff", run_id, check=3)["error"]["code"] == "NOT_A_REPOSITORY"


COMMITS = """
import subprocess
from flowdrop_tui import flow

@flow(resumable=True)
def main(run):
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t"]
    for n in run.rounds(range(4)):
        run.state["n"] = n
        name = f"round{run.round}.txt"
        (run.workspace / name).write_text(f"written in round {run.round}\\n")
        subprocess.run([*git, "add", name], cwd=run.workspace, check=True)
        subprocess.run([*git, "commit", "-qm", name], cwd=run.workspace, check=True)
        if n == 3:
            (run.workspace / "left.txt").write_text("not committed\\n")
    (run.workspace / "after.txt").write_text("written after the last round\\n")
"""
COMMITS_ALL = COMMITS.replace("@flow(resumable=True)", '@flow(resumable=True, stall_on="all")')


def test_diff_round_2_shows_exactly_the_file_round_2_committed(workspace: Path, cli: CLI) -> None:
    (workspace / ".gitignore").write_text("flows/\n")
    write_flow(workspace, "commits", COMMITS)
    cli("run", "commits", check=0)
    run_id = only_run(cli)
    found = cli.json("diff", run_id, "--round", "2")
    assert found["files"] == [{"path": "round2.txt", "status": "added"}]
    assert "+written in round 2" in found["patch"]
    assert "round1.txt" not in found["patch"] and "round3.txt" not in found["patch"]
    assert (found["run"], found["round"], found["uncommitted"]) == (run_id, 2, False)
    round2, round1 = subprocess.run(
        ["git", "rev-parse", "HEAD~2", "HEAD~3"], cwd=workspace, capture_output=True, text=True
    ).stdout.split()
    assert (found["start"], found["end"]) == (round1, round2)
    # by default the last round: a round with no agent session kept only its commits
    last = cli.json("diff", run_id)
    assert last["round"] == 4 and last["uncommitted"] is False and last["commits_only"]
    assert last["files"] == [{"path": "round4.txt", "status": "added"}]
    text = cli("diff", run_id, "--round", "3", check=0).stdout
    assert "round3.txt" in text and "+written in round 3" in text
    assert "only its commits are shown" in text


def test_diff_of_a_round_that_counts_shows_what_it_left_uncommitted(
    workspace: Path, cli: CLI
) -> None:
    """With ``stall_on="all"`` every round keeps snapshots: the last round's diff has the
    file it committed and the one it left — not what was there before it (.gitignore),
    nor what came after it (after.txt)."""
    (workspace / ".gitignore").write_text("flows/\n")
    write_flow(workspace, "commits", COMMITS_ALL)
    cli("run", "commits", check=0)
    run_id = only_run(cli)
    last = cli.json("diff", run_id)
    assert last["round"] == 4 and last["uncommitted"] is True and not last["commits_only"]
    assert last["files"] == [
        {"path": "left.txt", "status": "added"},
        {"path": "round4.txt", "status": "added"},
    ]
    assert "+not committed" in last["patch"] and ".gitignore" not in last["patch"]
    assert "after.txt" not in last["patch"]
    two = cli.json("diff", run_id, "--round", "2")
    assert two["files"] == [{"path": "round2.txt", "status": "added"}]
    assert two["uncommitted"] is False


def test_diff_refuses_what_it_cannot_show(workspace: Path, cli: CLI) -> None:
    (workspace / ".gitignore").write_text("flows/\n")
    write_flow(workspace, "commits", COMMITS)
    cli("run", "commits", check=0)
    run_id = only_run(cli)
    done = cli("diff", run_id, "--round", "9", check=2)
    assert f"run {run_id} did not run round 9; it ran rounds 1–4" in done.stderr
    assert cli.json("diff", run_id, "--round", "9", check=2)["error"]["code"] == "NOT_FOUND"
    assert "1 or more" in cli("diff", run_id, "--round", "0", check=2).stderr
    assert cli("diff", run_id, "--round", "two", check=2).returncode == 2
    unknown = "20260101T000000.000Z-abcdef"
    assert "no run " + unknown in cli("diff", unknown, check=2).stderr
    assert cli("diff", "../x", check=2).returncode == 2
    for done in (cli("diff", run_id, "--round", "9"), cli("diff", unknown)):
        assert "Traceback" not in done.stderr
    # a run that ran no rounds
    write_flow(
        workspace, "none", "from flowdrop_tui import flow\n\n@flow\ndef main(run):\n    return 1\n"
    )
    cli("run", "none", check=0)
    empty = cli.json("runs", "none")[0]["run"]
    assert "ran no rounds" in cli("diff", empty, check=2).stderr


def test_diff_of_a_last_round_leaves_out_what_was_uncommitted_before_it(
    workspace: Path, cli: CLI
) -> None:
    """As a new user would have it: flows/ never committed, a loop of two rounds each
    committing a file; round 2 is the latest run's last round, and still its diff is
    exactly the file it committed (flows/ was untracked before it began)."""
    write_flow(workspace, "two", COMMITS_ALL.replace("range(4)", "range(2)"))
    cli("run", "two", check=0)
    run_id = only_run(cli)
    found = cli.json("diff", run_id, "--round", "2")
    assert found["uncommitted"] is False  # all it changed, it committed
    assert found["files"] == [{"path": "round2.txt", "status": "added"}]
    assert "flows/" not in found["patch"]
