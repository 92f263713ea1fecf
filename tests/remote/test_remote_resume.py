"""A paused remote run resumed on a worker (docs/decisions.md, "Remote mode: reading"):
it goes on from its own commits
(pushed to ``refs/flowdrop/runs/<run>`` on the origin), and it records the branch the
client asked from, so ``plan`` and ``resume`` warn of a branch change only when there
is one. Real Temporal dev server, real PostgreSQL, real workers."""

from __future__ import annotations

import subprocess
from pathlib import Path

from flowdrop_tui.core.git import run_ref
from tests.remote.cluster import Client, Cluster, gated, make_client, wait_for
from tests.remote.git_origin import git
from tests.remote.test_workers import status, wait_status


def committing(gate: Path) -> str:
    """A flow whose round N commits ``round-N.txt`` in its checkout, then waits for the
    file ``gate/go-N``."""
    return f"""
    import subprocess
    import time
    from pathlib import Path
    from flowdrop_tui import flow

    GATE = Path({str(gate)!r})
    GIT = ["git", "-c", "user.name=run", "-c", "user.email=run@x"]

    @flow(resumable=True)
    def main(run):
        for r in run.rounds():
            run.state["round"] = r
            Path(f"round-{{r}}.txt").write_text(f"round {{r}}\\n")
            subprocess.run([*GIT, "add", f"round-{{r}}.txt"], check=True)
            subprocess.run([*GIT, "commit", "-qm", f"round {{r}}"], check=True)
            run.state["committed"] = r
            while not (GATE / f"go-{{r}}").exists():
                time.sleep(0.05)
"""


def subjects(origin: Path, ref: str) -> list[str]:
    done = subprocess.run(
        ["git", "log", "--format=%s", ref], cwd=origin, capture_output=True, text=True
    )
    return done.stdout.split("\n")[:-1] if done.returncode == 0 else []


def committed(client: Client, run: str, wanted: int) -> bool:
    return bool(client.json("show", run)["state"].get("flow", {}).get("committed") == wanted)


def test_a_resumed_run_goes_on_from_its_own_commits(
    cluster: Cluster, space: str, tmp_path: Path
) -> None:
    """Guards against a remote resume checking out the client's HEAD, which lacks what
    the run committed before its pause: round 2's commit must sit on round 1's."""
    worker = cluster.start_worker("a")
    client = make_client(cluster, space, tmp_path)
    gate = tmp_path / "gate"
    gate.mkdir()
    client.add_flow("flow", committing(gate))
    worker.wait_polling()
    run = client.json("run", "flow")["run"]
    wait_for("round 1 committed", lambda: committed(client, run, 1))
    client.json("pause", run)
    (gate / "go-1").touch()
    wait_status(client, run, "paused")
    ref = run_ref(run)
    wait_for("round 1 pushed", lambda: subjects(client.origin, ref)[:1] == ["round 1"])
    resumed = client.json("resume", run)
    assert resumed["run"] == run
    # nothing moved under it: same commit, same branch, so no drift and no fallback
    assert resumed["warnings"] == [], resumed["warnings"]
    wait_for("round 2 committed", lambda: committed(client, run, 2))
    client.json("stop", run)
    (gate / "go-2").touch()
    wait_status(client, run, "cancelled")
    kept = wait_for(
        "round 2 pushed",
        lambda: (lambda s: s if s[:1] == ["round 2"] else None)(subjects(client.origin, ref)),
    )
    assert kept[:3] == ["round 2", "round 1", "flow flow"], kept
    # the client's own branch is untouched: the run's commits are only at its ref
    assert git(client.ws, "log", "-1", "--format=%s") == "flow flow"


def test_a_resume_warns_of_a_branch_change_only_when_the_client_changed_branch(
    cluster: Cluster, space: str, tmp_path: Path
) -> None:
    """Guards against every remote run recording no branch (its worktree's HEAD is
    detached), which made `plan` and `resume` from a client on `main` warn of a branch
    change that never happened; a client on another branch must still be warned."""
    worker = cluster.start_worker("a")
    client = make_client(cluster, space, tmp_path)
    gate = tmp_path / "gate"
    gate.mkdir()
    client.add_flow("gated", gated(gate))
    worker.wait_polling()
    run = client.json("run", "gated")["run"]
    wait_for("round 1", lambda: status(client, run) == "running")
    client.json("pause", run)
    (gate / "go-1").touch()
    shown = wait_status(client, run, "paused")
    assert shown["git"]["start"]["branch"] == "main"
    client.sync()
    drift = client.json("plan", "gated")["drift"]
    assert drift["git"]["from"]["branch"] == "main" and drift["git"]["to"]["branch"] == "main"
    assert not drift["git"]["branch_changed"] and not drift["drifted"], drift
    # the same commit on another branch: that is a change, and it is said
    git(client.ws, "checkout", "-q", "-b", "other")
    drift = client.json("plan", "gated")["drift"]
    assert drift["git"]["branch_changed"], drift
    said = f"branch changed main → other since run {run} (paused)"
    assert said in drift["messages"]
    resumed = client.json("resume", run)
    assert said in resumed["warnings"], resumed["warnings"]
    wait_for("round 2", lambda: client.json("show", run)["state"]["gated"]["round"] == 2)
    client.json("stop", run)
    (gate / "go-2").touch()
    ended = wait_status(client, run, "cancelled")
    assert ended["git"]["end"]["branch"] == "other"
