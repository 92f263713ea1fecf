"""SPEC §20's scope: only a round that opened an agent session counts toward `stalled`;
a plain loop (a counter, a batch, command sessions only) runs as the seeds say — a loop
stopped on its fortieth round says round 41 — and pays no `git status` a round. A run
that completed ends the streaks. `diff --round N` shows what an agent round changed,
committed or not. Real runs of the real CLI in real git repositories; the agent here
is a plug-in backend that reports usage (the real Claude Code: tests/agents/test_real_agents.py).
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import CLI, events, wait_for, write_flow

ROOT = Path(__file__).resolve().parents[2]


def ran(ws: Path, run_id: str) -> list[int]:
    return [e["round"] for e in events(ws, run_id) if e["event"] == "round_started"]


def named(ws: Path, run_id: str, event: str) -> list[dict[str, Any]]:
    return [e for e in events(ws, run_id) if e["event"] == event]


def runs_of(cli: CLI, flow: str) -> list[str]:
    """The flow's runs, oldest first."""
    return [str(row["run"]) for row in reversed(cli.json("runs", flow))]


COUNTER = """
from flowdrop_tui import flow

@flow(resumable=True)
def main(run):
    for n in run.rounds(range(3)):
        print(f"round {run.round}")
"""


def test_a_counter_that_writes_nothing_run_twice_says_rounds_1_to_3_then_4_to_6(
    workspace: Path, cli: CLI
) -> None:
    """The reported case: the second run was paused `stalled` after round 5 (the streak
    ran across a completed run, and rounds with no agent session counted)."""
    write_flow(workspace, "count", COUNTER)
    first = cli("run", "count", check=0)
    second = cli("run", "count", check=0)
    assert "round 1\nround 2\nround 3\n" in first.stdout
    assert "round 4\nround 5\nround 6\n" in second.stdout
    one, two = runs_of(cli, "count")
    assert (ran(workspace, one), ran(workspace, two)) == ([1, 2, 3], [4, 5, 6])
    for run_id in (one, two):
        assert cli.json("show", run_id)["status"] == "completed"
        assert not named(workspace, run_id, "stalled")


def test_flows_batch_run_again_after_it_completed_runs_its_rounds_and_completes(
    workspace: Path, cli: CLI
) -> None:
    """The project's own batch: its second run finds every chapter done and skips each
    round's work — twelve rounds that change nothing, none with an agent session."""
    shutil.copytree(ROOT / "flows" / "batch", workspace / "flows" / "batch")
    cli("run", "batch", check=0, timeout=120)
    cli("run", "batch", check=0, timeout=120)
    _, two = runs_of(cli, "batch")
    assert ran(workspace, two) == list(range(13, 25))
    shown = cli.json("show", two)
    assert shown["status"] == "completed" and shown["paused_by"] is None
    assert shown["result"] == "12 chapters reviewed"


def test_a_plain_loop_of_eight_rounds_that_changes_nothing_completes(
    workspace: Path, cli: CLI
) -> None:
    write_flow(
        workspace,
        "eight",
        """
        from flowdrop_tui import flow

        @flow()
        def main(run):
            for n in run.rounds(range(8)):
                pass
            return "done"
        """,
    )
    cli("run", "eight", check=0)
    [run_id] = runs_of(cli, "eight")
    assert ran(workspace, run_id) == list(range(1, 9))
    shown = cli.json("show", run_id)
    assert (shown["status"], shown["result"]) == ("completed", "done")
    for ended in named(workspace, run_id, "round_ended"):
        moved = ended["moved"]
        assert moved["counted"] is False and isinstance(moved["head"], str)
        assert "tree" not in moved and "snapshot" not in moved  # no git status was run
    assert all(isinstance(e["head"], str) for e in named(workspace, run_id, "round_started"))


def test_stall_on_all_opts_a_plain_loop_in(workspace: Path, cli: CLI) -> None:
    write_flow(
        workspace,
        "optin",
        """
        from flowdrop_tui import flow

        @flow(stall=3, stall_on="all")
        def main(run):
            for n in run.rounds(range(8)):
                pass
        """,
    )
    done = cli("run", "optin", check=0)
    [run_id] = runs_of(cli, "optin")
    assert ran(workspace, run_id) == [1, 2, 3]
    assert named(workspace, run_id, "stalled")[0]["rounds"] == [1, 2, 3]
    assert "stalled: 3 rounds without a change" in done.stderr
    assert cli.json("show", run_id)["paused_by"]["kind"] == "stalled"


def test_a_bad_stall_on_is_refused_naming_it(workspace: Path, cli: CLI) -> None:
    write_flow(
        workspace,
        "bad",
        "from flowdrop_tui import flow\n\n@flow(stall_on='agents')\ndef main(run):\n    pass\n",
    )
    done = cli("run", "bad", check=1)
    assert """@flow(stall_on=...) takes "agent" or "all", not 'agents'""" in done.stderr
    assert "Traceback" not in done.stderr


def test_same_failure_still_counts_command_sessions(workspace: Path, cli: CLI) -> None:
    """`make check` failing the same way five times is what same_failure is for: a
    command session counts for it, though its rounds do not count toward stalled
    (and so measure no tree)."""
    write_flow(
        workspace,
        "check",
        """
        from flowdrop_tui import flow

        @flow()
        def main(run):
            for n in run.rounds(range(20)):
                run.session("command", ["sh", "-c", "echo 'check failed' >&2; exit 2"])
        """,
    )
    done = cli("run", "check", check=0)
    [run_id] = runs_of(cli, "check")
    assert ran(workspace, run_id) == [1, 2, 3, 4, 5]
    assert named(workspace, run_id, "same_failure")[0]["rounds"] == [1, 2, 3, 4, 5]
    assert "same failure 5 rounds in a row" in done.stderr
    for ended in named(workspace, run_id, "round_ended"):
        assert ended["moved"]["counted"] is False and "tree" not in ended["moved"]
        assert ended["moved"]["failure"]["exit_code"] == 2


def test_a_completed_run_ends_both_streaks(workspace: Path, cli: CLI) -> None:
    """Three rounds that change nothing (opted in), and three failing the same way,
    then the run completes: the next run of each starts new streaks and completes."""
    write_flow(
        workspace,
        "still",
        """
        from flowdrop_tui import flow

        @flow(resumable=True, stall_on="all")
        def main(run):
            for n in run.rounds(range(3)):
                pass
        """,
    )
    write_flow(
        workspace,
        "failing",
        """
        from flowdrop_tui import flow

        @flow(resumable=True)
        def main(run):
            for n in run.rounds(range(3)):
                run.session("command", ["sh", "-c", "exit 4"])
        """,
    )
    for flow in ("failing", "still"):  # command sessions first: no stall_on needed
        cli("run", flow, check=0)
        cli("run", flow, check=0)
        _, two = runs_of(cli, flow)
        assert ran(workspace, two) == [4, 5, 6], flow
        assert cli.json("show", two)["status"] == "completed", flow
        created = named(workspace, two, "created")[0]
        assert created["progress"]["unchanged"] == [] and created["progress"]["failed"] == []


# A plug-in backend that reports usage: an agent session (SPEC §20), in-process.
AGENT = """
from pathlib import Path
from flowdrop_tui import flow
from flowdrop_tui.core.sessions import Reply, register


class Writer:
    name = "writer"

    def run(self, session, prompt, options):
        session.open()
        for name, text in prompt.items():
            Path(session.workspace, name).write_text(text)
        return Reply(exit_code=0, text="ok", usage={"input": 10, "output": 5})


register(Writer())
"""


def test_diff_round_2_of_a_round_that_did_not_commit_lists_its_files(
    workspace: Path, cli: CLI
) -> None:
    """An agent writes files and commits nothing: each round's diff is what that round
    wrote (from its snapshots), not only the last round's and never the others'."""
    write_flow(
        workspace,
        "writes",
        AGENT
        + """
@flow()
def main(run):
    for n in run.rounds(range(3)):
        run.session("writer", {f"notes{run.round}.txt": f"round {run.round}\\n",
                               "shared.txt": f"shared {run.round}\\n"})
""",
    )
    cli("run", "writes", check=0)
    [run_id] = runs_of(cli, "writes")
    two = cli.json("diff", run_id, "--round", "2")
    assert two["files"] == [
        {"path": "notes2.txt", "status": "added"},
        {"path": "shared.txt", "status": "modified"},
    ]
    assert (
        "+round 2" in two["patch"] and "-shared 1" in two["patch"] and "+shared 2" in two["patch"]
    )
    assert two["uncommitted"] is True and two["commits_only"] is False
    text = cli("diff", run_id, "--round", "2", check=0).stdout
    assert "notes2.txt" in text and "notes1.txt" not in text and "notes3.txt" not in text
    one = cli.json("diff", run_id, "--round", "1")
    assert [row["path"] for row in one["files"]] == ["notes1.txt", "shared.txt"]
    for ended in named(workspace, run_id, "round_ended"):
        assert ended["moved"]["counted"] is True
        assert ended["moved"]["changed"] == ["tree"]


def test_an_agent_round_that_changes_nothing_counts_and_pauses_after_five(
    workspace: Path, cli: CLI
) -> None:
    """Rounds with an agent session that changes nothing count; plain rounds between
    them neither count nor break the streak."""
    write_flow(
        workspace,
        "idle",
        AGENT
        + """
@flow()
def main(run):
    for n in run.rounds(range(30)):
        if n % 2 == 0:
            run.session("writer", {})
""",
    )
    cli("run", "idle", check=0)
    [run_id] = runs_of(cli, "idle")
    (stalled,) = named(workspace, run_id, "stalled")
    assert stalled["rounds"] == [1, 3, 5, 7, 9]
    assert ran(workspace, run_id) == list(range(1, 10))
    diff = cli("diff", run_id, "--round", "9", check=0).stdout
    assert "no changes" in diff


def test_a_plain_round_runs_no_git_status(
    workspace: Path, cli: CLI, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every git the run starts is logged (a `git` first on PATH that logs and calls the
    real one): a plain loop's rounds start no `git status`, an agent round starts one."""
    shim = tmp_path / "bin"
    shim.mkdir()
    log = tmp_path / "git.log"
    real = shutil.which("git")
    assert real is not None
    (shim / "git").write_text(f'#!/bin/sh\necho "$*" >> {log}\nexec {real} "$@"\n')
    (shim / "git").chmod(stat.S_IRWXU)
    env_path = f"{shim}{os.pathsep}{os.environ['PATH']}"
    write_flow(
        workspace,
        "plain",
        AGENT
        + """
import os
@flow()
def main(run):
    for n in run.rounds(range(12)):
        if os.environ.get("WITH_AGENT") and n == 11:
            run.session("writer", {"x.txt": "x"})
""",
    )
    monkeypatch.setenv("PATH", env_path)
    cli("run", "plain", check=0)
    plain = log.read_text() if log.exists() else ""
    log.unlink(missing_ok=True)
    monkeypatch.setenv("WITH_AGENT", "1")
    cli("run", "plain", check=0)
    agent = log.read_text()
    status = "status --porcelain=v2"  # the tree's digest (SPEC §20)
    assert status not in plain
    assert plain.count("rev-parse") < 12  # HEAD is read from git's files, not a process
    assert agent.count(status) == 2  # before the agent's session, and at its round's end
    assert "update-index" in agent and "write-tree" in agent


def test_diff_names_a_huge_untracked_file_and_never_reads_it(workspace: Path, cli: CLI) -> None:
    """A 1 GB untracked file (sparse: no disk spent) left by a round that counts: it is
    neither hashed into the round's snapshot nor diffed (it took 24 s), and the diff
    says it was left out; the small file beside it is shown."""
    write_flow(
        workspace,
        "huge",
        """
        import os
        from flowdrop_tui import flow

        @flow(stall_on="all")
        def main(run):
            for n in run.rounds(range(1)):
                with open(run.workspace / "big.bin", "wb") as big:
                    big.truncate(1 << 30)
                (run.workspace / "small.txt").write_text("small\\n")
        """,
    )
    cli("run", "huge", check=0)
    [run_id] = runs_of(cli, "huge")
    (ended,) = named(workspace, run_id, "round_ended")
    assert ended["moved"]["skipped"] == ["big.bin"]
    found = cli.json("diff", run_id)
    assert found["files"] == [{"path": "small.txt", "status": "added"}]
    assert found["skipped"] == ["big.bin"]
    text = cli("diff", run_id, check=0).stdout
    assert "not read (over 8 MiB): big.bin" in text and "+small" in text


def test_snapshots_never_touch_the_users_index_or_refs(
    workspace: Path, cli: CLI, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A staged change and an untracked file before the run; agent rounds write files
    and make snapshots: the index is byte for byte what it was, the refs and the stash
    are as they were, and the staged change is still staged. The snapshots' own index
    is gone with the run."""
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    monkeypatch.setenv("TMPDIR", str(temporary))
    (workspace / "staged.txt").write_text("staged\n")
    subprocess.run(["git", "add", "staged.txt"], cwd=workspace, check=True)
    (workspace / "loose.txt").write_text("untracked\n")
    write_flow(
        workspace,
        "writes",
        AGENT
        + """
@flow()
def main(run):
    for n in run.rounds(range(3)):
        run.session("writer", {f"notes{run.round}.txt": "x\\n", "loose.txt": f"{n}\\n"})
""",
    )

    def looks() -> tuple[bytes, bytes, bytes, bytes]:
        git = ["git", "-C", str(workspace)]
        refs = subprocess.run([*git, "for-each-ref"], capture_output=True, check=True).stdout
        stash = subprocess.run([*git, "stash", "list"], capture_output=True, check=True).stdout
        staged = subprocess.run(
            [*git, "diff", "--cached", "--name-only"], capture_output=True, check=True
        ).stdout
        return (workspace / ".git" / "index").read_bytes(), refs, stash, staged

    before = looks()
    cli("run", "writes", check=0)
    assert looks() == before
    assert list(temporary.iterdir()) == []
    assert before[3] == b"staged.txt\n"
    [run_id] = runs_of(cli, "writes")
    three = cli.json("diff", run_id, "--round", "3")
    assert three["files"] == [
        {"path": "loose.txt", "status": "modified"},
        {"path": "notes3.txt", "status": "added"},
    ]


def test_snapshots_follow_deletions_and_commits_round_after_round(
    workspace: Path, cli: CLI
) -> None:
    """The snapshots' own index is kept between rounds: a file added in round 1 and
    deleted in round 2 (git status no longer lists it) is gone from round 2's end; a
    file committed in round 3 (the user's index changed) is there, committed; round 4
    changed nothing and its snapshots are one tree."""
    (workspace / ".gitignore").write_text("flows/\n")
    write_flow(
        workspace,
        "steps",
        AGENT
        + """
import subprocess
@flow()
def main(run):
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t"]
    for n in run.rounds(range(4)):
        if n == 0:
            run.session("writer", {"a.txt": "a\\n"})
        elif n == 1:
            (run.workspace / "a.txt").unlink()
            run.session("writer", {})
        elif n == 2:
            run.session("writer", {"b.txt": "b\\n"})
            subprocess.run([*git, "add", "b.txt"], cwd=run.workspace, check=True)
            subprocess.run([*git, "commit", "-qm", "b"], cwd=run.workspace, check=True)
        else:
            run.session("writer", {})
""",
    )
    cli("run", "steps", check=0)
    [run_id] = runs_of(cli, "steps")

    def files(number: int) -> list[dict[str, str]]:
        return list(cli.json("diff", run_id, "--round", str(number))["files"])

    assert files(1) == [{"path": "a.txt", "status": "added"}]
    assert files(2) == [{"path": "a.txt", "status": "deleted"}]
    assert files(3) == [{"path": "b.txt", "status": "added"}]
    assert cli.json("diff", run_id, "--round", "3")["uncommitted"] is False
    assert files(4) == []
    snapshots = [e["moved"]["snapshot"] for e in named(workspace, run_id, "round_ended")]
    assert snapshots[3]["start"] == snapshots[3]["end"] == snapshots[2]["end"]


def test_a_killed_runs_snapshot_index_is_removed_by_the_next_run(workspace: Path, cli: CLI) -> None:
    """The index copy a run's snapshots use lives in `.flowdrop/cache/snapshots/`, named
    for its process: a kill -9 leaves it behind, and the next run's first snapshot
    removes it (it used to stay in the system's temporary folder for good)."""
    write_flow(
        workspace,
        "held",
        AGENT
        + """
import time

@flow(resumable=True)
def main(run):
    for n in run.rounds(range(3)):
        run.session("writer", {f"notes{run.round}.txt": "x\\n"})
        while run.round == 2 and not Path("go").exists():
            time.sleep(0.05)
""",
    )
    folder = workspace / ".flowdrop" / "cache" / "snapshots"
    held = cli.start("run", "held")
    try:
        [left] = wait_for(lambda: list(folder.glob("index-*")) if folder.is_dir() else [])
        pid = int(left.name.split("-")[1])
        os.kill(pid, 9)
        held.wait(timeout=60)
    finally:
        if held.poll() is None:
            held.kill()
    assert left.exists()  # what a kill -9 leaves
    (workspace / "go").write_text("")
    cli("run", "held", check=0)
    assert not left.exists()
    assert list(folder.glob("index-*")) == []  # the second run's own copy went at its end
