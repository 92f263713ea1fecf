"""Drift (SPEC §15): what changed since the run being picked up or resumed, said before
the start (plan, stderr, --json, the record) and refused under --strict."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import orjson

from tests.conftest import CLI, events, paused_mid_run, write_flow

BATCH = """
import time
from flowdrop_tui import flow

ITEMS = ["a", "b", "c", "d"]

@flow(resumable=True)
def main(run):
    done = run.state.setdefault("done", [])
    for item in run.rounds(ITEMS):
        done.append(item)
        while (run.workspace / "hold").exists():
            time.sleep(0.02)
"""

ONCE = """
from flowdrop_tui import flow

@flow(resumable=True)
def main(run):
    for n in run.rounds():
        run.state["n"] = n
        return n
"""

GIT_ENV = {
    **os.environ,
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@t",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@t",
}


def git(ws: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=ws, check=True, env=GIT_ENV, capture_output=True)


def runs_of(ws: Path) -> list[str]:
    return sorted(p.name for p in (ws / ".flowdrop" / "runs").iterdir())


def test_pause_edit_resume_warns_before_and_strict_refuses(workspace: Path, cli: CLI) -> None:
    """The issue's repro: a paused batch, an item inserted at the front of its list, a
    resume. Said by plan before anything runs, on stderr, in --json and the record;
    --strict refuses it with DRIFTED and the run stays paused."""
    run_id = paused_mid_run(workspace, cli, "batch", BATCH)
    flow_file = workspace / "flows" / "batch" / "flow.py"
    flow_file.write_text(flow_file.read_text().replace('["a", "b"', '["new", "a", "b"'))

    plan = cli.json("plan", "batch")
    assert plan["start"] == "resume" and plan["source"] == run_id
    assert plan["refusal"] is None
    drift = plan["drift"]
    assert drift["drifted"] and drift["flow_changed"] is True
    assert drift["paused_at_item"] == plan["item_index"] == 1
    said = " ".join(drift["messages"])
    assert "flow's code changed" in said and "may no longer match" in said
    assert plan["warnings"] == drift["messages"]

    cycle = workspace / ".flowdrop" / "runs" / run_id / "cycle.jsonl"
    before = cycle.read_bytes()
    for args in (("resume", run_id, "--strict"), ("run", "batch", "--strict")):
        refused = cli.json(*args, check=3)
        assert refused["error"]["code"] == "DRIFTED"
        assert "flow's code changed" in refused["error"]["message"]
    strict_plan = cli("plan", "batch", "--strict", "--json", check=3)
    assert '"code": "DRIFTED"' in strict_plan.stdout
    assert cycle.read_bytes() == before  # nothing ran, nothing was written

    done = cli("resume", run_id, "--json", check=0)
    assert "warning: the flow's code changed" in done.stderr
    assert "may no longer match" in done.stderr
    answer = orjson.loads(done.stdout)
    assert answer["warnings"] == drift["messages"]
    warned = [e for e in events(workspace, run_id) if e["event"] == "warning"]
    assert [e["message"] for e in warned if e.get("kind") == "drift"] == drift["messages"]
    resumed = [e for e in events(workspace, run_id) if e["event"] == "resumed"]
    assert resumed[-1]["flow_digest"] != events(workspace, run_id)[0]["flow_digest"]
    # resumed once with the new code, it has not drifted from itself any more
    assert cli.json("show", run_id)["status"] == "completed"


def test_a_commit_between_two_runs_is_drift(workspace: Path, cli: CLI) -> None:
    write_flow(workspace, "once", ONCE)
    git(workspace, "add", "flows")
    git(workspace, "commit", "-q", "-m", "the flow")
    first = cli.json("run", "once")["run"]
    # nothing changed: no drift, --strict goes
    quiet = cli.json("plan", "once", "--strict")
    assert quiet["drift"]["drifted"] is False and quiet["refusal"] is None
    second = cli.json("run", "once", "--strict")
    assert second["warnings"] == [] and second["picked_up_from"] == first

    (workspace / "notes.txt").write_text("x")
    git(workspace, "add", "notes.txt")
    git(workspace, "commit", "-q", "-m", "notes")
    plan = cli.json("plan", "once")
    assert plan["source"] == second["run"]
    assert plan["drift"]["git"]["commits"] == 1 and plan["drift"]["git"]["head_changed"]
    assert plan["drift"]["flow_changed"] is False
    before = runs_of(workspace)
    refused = cli.json("run", "once", "--strict", check=3)
    assert (
        refused["error"]["code"] == "DRIFTED" and "1 commit between" in refused["error"]["message"]
    )
    assert runs_of(workspace) == before

    done = cli("run", "once", "--json", check=0)
    assert "warning: HEAD moved" in done.stderr and "(1 commit between)" in done.stderr
    third = orjson.loads(done.stdout)
    assert any("1 commit between" in w for w in third["warnings"])
    assert any(
        e["event"] == "warning" and e.get("kind") == "drift"
        for e in events(workspace, third["run"])
    )


def test_a_branch_change_and_new_uncommitted_changes_are_drift(workspace: Path, cli: CLI) -> None:
    write_flow(workspace, "once", ONCE)
    git(workspace, "add", "flows")
    git(workspace, "commit", "-q", "-m", "the flow")
    first = cli.json("run", "once")["run"]
    git(workspace, "checkout", "-q", "-b", "other")
    (workspace / "scratch.txt").write_text("uncommitted")
    plan = cli.json("plan", "once", "--from", first)
    drift = plan["drift"]
    assert drift["git"]["branch_changed"] and drift["git"]["became_dirty"]
    assert not drift["git"]["head_changed"]
    said = " ".join(drift["messages"])
    assert "branch changed main → other" in said and "uncommitted changes" in said


def test_a_fresh_start_or_a_snapshot_has_no_drift(workspace: Path, cli: CLI) -> None:
    write_flow(workspace, "once", ONCE)
    cli.json("run", "once")
    (workspace / "flows" / "once" / "helper.py").write_text("X = 1\n")
    assert cli.json("plan", "once", "--fresh")["drift"] is None
    assert cli.json("plan", "once")["drift"]["flow_changed"] is True  # a file beside flow.py


def test_picking_up_from_a_callers_run_compares_git_not_another_flows_code(
    workspace: Path, cli: CLI
) -> None:
    """The thread's latest state may sit in a caller's run (another key): its recorded
    digest is the caller's folder, so the code cannot be compared — never a false drift."""
    write_flow(
        workspace,
        "callee",
        """
        from flowdrop_tui import flow

        @flow(resumable=True)
        def main(run, n=0):
            run.state["n"] = n
            return n
        """,
    )
    write_flow(
        workspace,
        "caller",
        """
        from flowdrop_tui import flow

        @flow()
        def main(run):
            return run.call("callee", n=7)
        """,
    )
    caller = cli.json("run", "caller")["run"]
    plan = cli.json("plan", "callee", "--strict")
    assert plan["source"] == caller and plan["start"] == "thread"
    assert plan["drift"]["flow_changed"] is None and plan["drift"]["drifted"] is False
    assert plan["refusal"] is None
