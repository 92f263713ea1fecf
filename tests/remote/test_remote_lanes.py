"""Lanes on workers (SPEC §23, docs/remote.md "Lanes"): a lane's run works in the
worker's own worktree at the lane's tip, and at each round's end (and at its end) the
worker's run child pushes the lane's branch to the origin, ``--force-with-lease`` on
that branch alone. Real Temporal dev server, real PostgreSQL, real workers."""

from __future__ import annotations

import subprocess
from pathlib import Path

from flowdrop_tui.core.lanes.known import lane_of
from flowdrop_tui.core.paths import Layout
from tests.remote.cluster import Client, Cluster, make_client, wait_for
from tests.remote.git_origin import GIT_ENV, git
from tests.remote.test_remote_resume import committing, subjects
from tests.remote.test_workers import wait_status

ONE, TWO = "refs/heads/flowdrop/flow/1", "refs/heads/flowdrop/flow/2"


def committed(client: Client, run: str, key: str, wanted: int) -> bool:
    state = client.json("show", run)["state"].get(key, {})
    return bool(state.get("committed") == wanted)


def refs(origin: Path) -> dict[str, str]:
    """The origin's refs but the runs' own (``refs/flowdrop/runs/…``)."""
    listed = git(origin, "for-each-ref", "--format=%(refname) %(objectname)")
    pairs = (line.split(" ") for line in listed.splitlines())
    return {ref: sha for ref, sha in pairs if not ref.startswith("refs/flowdrop/runs/")}


def tip(origin: Path, ref: str) -> str | None:
    found = subjects(origin, ref)
    return found[0] if found else None


def test_a_lane_pushes_its_branch_at_each_round_end_and_its_next_run_goes_on(
    cluster: Cluster, space: str, tmp_path: Path
) -> None:
    """Guards against a lane on a worker making a second worktree there, or leaving its
    commits only at the run's own ref: the origin's lane branch has round 1 once it
    ended (while round 2 waits), and a second run of the lane starts from that branch,
    not from the client's HEAD. Nothing but the lane's branch moves on the origin."""
    worker = cluster.start_worker("a")
    client = make_client(cluster, space, tmp_path)
    gate = tmp_path / "gate"
    gate.mkdir()
    client.add_flow("flow", committing(gate))
    before = refs(client.origin)
    worker.wait_polling()
    run = client.json("run", "flow@1")["run"]
    wait_for("round 1 committed", lambda: committed(client, run, "flow@1", 1))
    assert tip(client.origin, ONE) is None  # no round has ended yet
    (gate / "go-1").touch()
    wait_for("round 2 committed", lambda: committed(client, run, "flow@1", 2))
    wait_for("round 1 pushed", lambda: tip(client.origin, ONE) == "round 1")
    client.json("stop", run)
    (gate / "go-2").touch()
    wait_status(client, run, "cancelled")
    assert subjects(client.origin, ONE)[:3] == ["round 2", "round 1", "flow flow"]
    client.sync()
    lane = lane_of(Layout(client.ws), "flow@1")  # the record's facts, the path the worker's
    assert lane is not None and (lane.branch, lane.base_branch) == ("flowdrop/flow/1", "main")
    assert not lane.path.exists()  # the worker's own worktree was the lane's: no second
    # the next run of the lane picks up its state and continues its branch
    again = client.json("run", "flow@1")["run"]
    assert again != run
    wait_for("round 3 committed", lambda: committed(client, again, "flow@1", 3))
    client.json("stop", again)
    (gate / "go-3").touch()
    wait_status(client, again, "cancelled")
    assert subjects(client.origin, ONE)[:4] == ["round 3", "round 2", "round 1", "flow flow"]
    after = refs(client.origin)
    assert after.pop(ONE) and after == before  # main, and everything else, untouched
    assert git(client.ws, "log", "-1", "--format=%s") == "flow flow"


def test_two_lanes_run_at_once_and_a_push_never_overwrites_a_moved_branch(
    cluster: Cluster, space: str, tmp_path: Path
) -> None:
    """Guards against lanes of one flow sharing a checkout or a branch on a worker, and
    against a plain force push: lane 2's branch moved on the origin by someone else
    while its run works is left as they left it (the lease refuses), lane 1's goes on."""
    worker = cluster.start_worker("a")
    client = make_client(cluster, space, tmp_path)
    gate = tmp_path / "gate"
    gate.mkdir()
    client.add_flow("flow", committing(gate))
    worker.wait_polling()
    first = client.json("run", "flow@1")["run"]
    second = client.json("run", "flow@2")["run"]
    for run, key in ((first, "flow@1"), (second, "flow@2")):
        wait_for(f"{key} round 1 committed", lambda r=run, k=key: committed(client, r, k, 1))
    # someone else's commit on lane 2's branch, from the client
    git(client.ws, "commit", "-q", "--allow-empty", "-m", "foreign")
    git(client.ws, "push", "-q", "origin", f"HEAD:{TWO}")
    git(client.ws, "reset", "-q", "--hard", "HEAD~1")
    (gate / "go-1").touch()
    for run, key in ((first, "flow@1"), (second, "flow@2")):
        wait_for(f"{key} round 2 committed", lambda r=run, k=key: committed(client, r, k, 2))
    wait_for("lane 1's round 1 pushed", lambda: tip(client.origin, ONE) == "round 1")
    for run in (first, second):
        client.json("stop", run)
    (gate / "go-2").touch()
    wait_status(client, first, "cancelled")
    wait_status(client, second, "cancelled")
    assert subjects(client.origin, ONE)[:3] == ["round 2", "round 1", "flow flow"]
    assert subjects(client.origin, TWO)[:2] == ["foreign", "flow flow"]
    said = client.cli("logs", second).stdout
    assert "lane branch flowdrop/flow/2 not pushed" in said, said
    # its commits are not lost: kept at the run's own ref
    kept = subprocess.run(
        ["git", "log", "--format=%s", f"refs/flowdrop/runs/{second}"],
        cwd=client.origin,
        env=GIT_ENV | {"PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
    ).stdout.split("\n")
    assert kept[:2] == ["round 2", "round 1"], kept


def test_a_paused_lane_resumes_on_its_branch(cluster: Cluster, space: str, tmp_path: Path) -> None:
    """Guards against a resumed lane's run making a worktree on the worker (its reopen
    took the local path) or starting from the client's HEAD: its pause pushed round 1,
    and round 2 lands on top of it."""
    worker = cluster.start_worker("a")
    client = make_client(cluster, space, tmp_path)
    gate = tmp_path / "gate"
    gate.mkdir()
    client.add_flow("flow", committing(gate))
    worker.wait_polling()
    run = client.json("run", "flow@1")["run"]
    wait_for("round 1 committed", lambda: committed(client, run, "flow@1", 1))
    client.json("pause", run)
    (gate / "go-1").touch()
    wait_status(client, run, "paused")
    assert tip(client.origin, ONE) == "round 1"
    assert client.json("resume", run)["run"] == run
    wait_for("round 2 committed", lambda: committed(client, run, "flow@1", 2))
    client.json("stop", run)
    (gate / "go-2").touch()
    wait_status(client, run, "cancelled")
    assert subjects(client.origin, ONE)[:3] == ["round 2", "round 1", "flow flow"]
