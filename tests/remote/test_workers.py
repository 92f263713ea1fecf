"""Runs on Temporal workers (docs/decisions.md, "Runs on Temporal workers"): the real dev
server, real PostgreSQL, real ``flowdrop-tui worker`` processes with their own homes, a
bare git origin, and the client's real CLI. Every answer is the local one: same codes,
same JSON shapes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import orjson

from flowdrop_tui.core.remote.postgres.store import PostgresStore
from flowdrop_tui.core.remote.workflow import HEARTBEAT_TIMEOUT
from tests.remote.cluster import COUNTER, Client, Cluster, gated, make_client, wait_for

# Rounds long enough that a second request lands while the first is still pending.
SLOW = COUNTER.replace("time.sleep(0.4)", "time.sleep(2.0)")


def status(client: Client, run: str) -> str:
    return str(client.json("show", run)["status"])


def wait_status(client: Client, run: str, wanted: str, timeout: float = 60.0) -> dict[str, Any]:
    def reached() -> dict[str, Any] | None:
        shown: dict[str, Any] = client.json("show", run)
        return shown if shown["status"] == wanted else None

    found: dict[str, Any] = wait_for(f"run {run} {wanted}", reached, timeout)
    return found


def refused(client: Client, *args: str) -> str:
    answer = client.json(*args, code=3)
    return str(answer["error"]["code"])


def holder(cluster: Cluster, space: str, run: str) -> str:
    """The worker holding ``run`` as PostgreSQL records it, once it is live."""
    store = PostgresStore(cluster.postgres, space)

    def live() -> dict[str, Any] | None:
        info = store.run_info(run)
        return info if info and info["live"] else None

    try:
        return str(wait_for(f"run {run} live", live)["worker"])
    finally:
        store.close()


def test_a_run_goes_to_a_worker_and_the_client_sees_it(
    cluster: Cluster, space: str, tmp_path: Path
) -> None:
    """Guards against a remote `run` running on the client, or its record not reaching
    the client's view (`runs --json` over the replica)."""
    worker = cluster.start_worker("a")
    client = make_client(cluster, space, tmp_path)
    client.add_flow("counter", COUNTER)
    worker.wait_polling()
    started = client.json("run", "counter")
    assert set(started) == {"run", "flow", "warnings"} and started["flow"] == "counter"
    run = started["run"]
    assert holder(cluster, space, run) == "a"
    assert not (client.ws / ".flowdrop" / "runs" / run / "live.lock").exists()
    wait_for("a round", lambda: client.json("show", run)["state"].get("counter", {}).get("round"))
    rows = client.json("runs", "counter")
    assert [r["run"] for r in rows] == [run] and rows[0]["status"] == "running"
    stopped = client.json("stop", run, "--now")
    assert stopped["action"] == "stop_now" and stopped["run"] == run
    shown = wait_status(client, run, "cancelled")
    assert shown["state"]["counter"]["round"] >= 1


def test_a_dead_workers_run_is_interrupted_then_picked_up_on_another(
    cluster: Cluster, space: str, tmp_path: Path
) -> None:
    """Guards against a run held by a dead machine staying `running` for good, and
    against the next run starting over instead of from the last saved state."""
    first = cluster.start_worker("a", max_runs=1)
    client = make_client(cluster, space, tmp_path)
    client.add_flow("counter", COUNTER)
    first.wait_polling()
    run = client.json("run", "counter")["run"]
    assert holder(cluster, space, run) == "a"
    second = cluster.start_worker("b", max_runs=1)
    wait_for(
        "three rounds saved",
        lambda: client.json("show", run)["state"].get("counter", {}).get("round", 0) >= 3,
    )
    second.wait_polling()
    first.kill_machine()
    killed = time.monotonic()
    shown = wait_status(client, run, "interrupted", timeout=HEARTBEAT_TIMEOUT.seconds + 30)
    took = time.monotonic() - killed
    print(f"kill -9 to interrupted: {took:.1f} s (heartbeat timeout {HEARTBEAT_TIMEOUT})")
    saved = shown["state"]["counter"]
    last = shown["last_round"]
    assert saved["rounds"] == list(range(1, saved["round"] + 1))
    picked = wait_for(
        "the key free again",
        lambda: (lambda d: d if d.returncode == 0 else None)(
            client.cli("run", "counter", "--json", check=False)
        ),
        timeout=30,
    )
    again = orjson.loads(picked.stdout)["run"]
    assert holder(cluster, space, again) == "b"
    resumed = wait_for(
        "a round on b",
        lambda: (lambda s: s if s["state"].get("counter", {}).get("round", 0) > last else None)(
            client.json("show", again)
        ),
    )
    assert resumed["picked_up_from"] == run and resumed["first_round"] == last + 1
    state = resumed["state"]["counter"]
    assert state["rounds"][: len(saved["rounds"])] == saved["rounds"]  # carried, not fresh
    client.json("stop", again, "--now")
    wait_status(client, again, "cancelled")


def test_ten_racing_runs_of_one_key_make_exactly_one_run(
    cluster: Cluster, space: str, tmp_path: Path
) -> None:
    """Guards against two workers each running the key (the cluster-wide one-live-run
    rule): ten clients start it at once; one run, nine ALREADY_RUNNING (exit 3)."""
    workers = [cluster.start_worker(name) for name in ("a", "b")]
    client = make_client(cluster, space, tmp_path)
    client.add_flow("counter", SLOW)
    for worker in workers:
        worker.wait_polling()
    command = [sys.executable, "-m", "flowdrop_tui", "--workspace", str(client.ws)]
    racers = [
        subprocess.Popen(
            [*command, "run", "counter", "--json"],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        for _ in range(10)
    ]
    answers = [(p.wait(timeout=180), orjson.loads(p.communicate()[0])) for p in racers]
    won = [a for code, a in answers if code == 0]
    lost = [a for code, a in answers if code == 3]
    assert len(won) == 1 and len(lost) == 9, answers
    assert {a["error"]["code"] for a in lost} == {"ALREADY_RUNNING"}
    run = won[0]["run"]
    again = client.json("run", "counter", code=3)["error"]["message"]
    assert f"run {run} on worker" in again and f"flowdrop-tui stop {run}" in again
    assert [r["run"] for r in client.json("runs", "counter")] == [run]
    client.json("stop", run, "--now")
    wait_status(client, run, "cancelled")


def test_stop_pause_resume_across_machines_with_every_refusal(
    cluster: Cluster, space: str, tmp_path: Path
) -> None:
    """Guards against remote stop/pause/resume answering differently from local mode:
    each verb reaches the worker holding the run, and each refusal carries its code."""
    workers = [cluster.start_worker(name, max_runs=1) for name in ("a", "b")]
    client = make_client(cluster, space, tmp_path)
    gate = tmp_path / "gate"
    gate.mkdir()
    client.add_flow("gated", gated(gate))
    for worker in workers:
        worker.wait_polling()
    run = client.json("run", "gated")["run"]
    wait_for("round 1", lambda: status(client, run) == "running")
    assert refused(client, "run", "gated") == "ALREADY_RUNNING"
    assert refused(client, "resume", run) == "NO_ACTIVE_PAUSE"
    paused = client.json("pause", run)
    assert paused["action"] == "pause" and paused["status"] == "running"
    assert refused(client, "pause", run) == "INWARD_SIGNAL_ALREADY_PENDING"
    first = holder(cluster, space, run)
    (gate / "go-1").touch()
    wait_status(client, run, "paused")
    assert refused(client, "pause", run) == "ALREADY_PAUSED"
    # its machine goes away while it is paused: it resumes on the other one, in the
    # same record, and the requests that follow reach it there
    by_name = {w.worker_id: w for w in workers}
    by_name[first].stop()
    resumed = client.json("resume", run)
    assert resumed["run"] == run
    assert holder(cluster, space, run) != first
    wait_for("round 2", lambda: client.json("show", run)["state"]["gated"]["round"] == 2)
    stopped = client.json("stop", run)
    assert stopped["action"] == "stop" and stopped["round"] == 2
    (gate / "go-2").touch()
    shown = wait_status(client, run, "cancelled")
    assert shown["last_round"] == 2
    for verb in (["stop", run], ["pause", run], ["resume", run]):
        assert refused(client, *verb) == "PIPELINE_TERMINAL"
    # a terminal snapshot is refused (INT-14), the file sent to the worker by content
    snapshot = tmp_path / "ended.json"
    client.sync()
    snapshot.write_text(client.cli("snapshot", run).stdout)
    assert refused(client, "run", "gated", "--snapshot", str(snapshot)) == "PIPELINE_TERMINAL"
    # a budget already used up is refused on the worker, before any run exists
    assert refused(client, "run", "gated", "--max-rounds", "1") == "BUDGET_EXHAUSTED"
    assert [r["run"] for r in client.json("runs", "gated")] == [run]
    # stop of a paused run closes it, through a worker that holds its key
    again = client.json("run", "gated")["run"]
    wait_for("round 3", lambda: status(client, again) == "running")
    client.json("pause", again)
    (gate / "go-3").touch()
    wait_status(client, again, "paused")
    closed = client.json("stop", again)
    assert closed["action"] == "closed" and closed["status"] == "cancelled"
    assert refused(client, "resume", again) == "PIPELINE_TERMINAL"


def test_a_commit_not_on_the_origin_is_refused_by_the_worker(
    cluster: Cluster, space: str, tmp_path: Path
) -> None:
    """Guards against a worker running some other commit than the client's HEAD."""
    worker = cluster.start_worker("a")
    client = make_client(cluster, space, tmp_path)
    client.add_flow("counter", COUNTER)
    (client.ws / "flows" / "counter" / "note.txt").write_text("local\n")
    subprocess.run(["git", "add", "-A"], cwd=client.ws, check=True)
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "unpushed"],
        cwd=client.ws,
        check=True,
    )
    worker.wait_polling()
    answer = client.json("run", "counter", code=3)
    assert answer["error"]["code"] == "NOT_ON_ORIGIN"
    assert "push" in answer["error"]["message"]
    # the key is free again: the refusal held nothing
    subprocess.run(["git", "push", "-q", "origin", "HEAD:main"], cwd=client.ws, check=True)
    run = client.json("run", "counter")["run"]
    client.json("stop", run, "--now")
    wait_status(client, run, "cancelled")


def test_a_flow_never_committed_is_refused_saying_to_commit_and_push(
    cluster: Cluster, space: str, tmp_path: Path
) -> None:
    """Issue 38 item 8: a new flow, its file untracked, failed on the worker with
    "flows/fresh/flow.py does not exist" though the file was there; the client now says
    it is not committed and what to do, before asking any worker."""
    worker = cluster.start_worker("a")
    client = make_client(cluster, space, tmp_path)
    folder = client.ws / "flows" / "fresh"
    folder.mkdir(parents=True)
    (folder / "flow.py").write_text(textwrap.dedent(COUNTER).lstrip())
    worker.wait_polling()
    answer = client.json("run", "fresh", code=3)
    message = answer["error"]["message"]
    assert answer["error"]["code"] == "NOT_ON_ORIGIN", answer
    assert "flow fresh is not committed" in message and "flows/fresh/flow.py" in message
    assert "commit and push" in message and "does not exist" not in message
    assert client.json("runs", "fresh") == []  # nothing was started


def test_a_pick_up_from_a_checkout_only_behind_says_behind_not_rewritten(
    cluster: Cluster, space: str, tmp_path: Path
) -> None:
    """Issue 38 item 6: a run that committed on its worker, then a `run` from a client
    that never fetched its commits: the pick-up's drift warning said "not a descendant:
    history was rewritten", though the client's HEAD is only behind (an ancestor)."""
    worker = cluster.start_worker("a")
    client = make_client(cluster, space, tmp_path)
    client.add_flow("committer", COMMITTER.replace("@flow()", "@flow(resumable=True)"))
    worker.wait_polling()
    first = client.json("run", "committer")["run"]
    wait_status(client, first, "completed")
    again = client.json("run", "committer")
    said = " ".join(again["warnings"])
    assert f"behind: 1 commit of run {first}'s are not in this checkout" in said, said
    assert "history was rewritten" not in said, said
    wait_status(client, again["run"], "completed")


def test_prune_deletes_the_pruned_runs_refs_on_the_origin(
    cluster: Cluster, space: str, tmp_path: Path
) -> None:
    """Issue 38 item 11: refs/flowdrop/runs/* on the origin were never pruned, so every
    `show` fetched the refs of runs long deleted. A pruned run's ref goes with it; the
    kept run's stays."""
    worker = cluster.start_worker("a")
    client = make_client(cluster, space, tmp_path)
    client.add_flow("committer", COMMITTER)
    worker.wait_polling()
    runs = []
    for _ in range(2):
        run = client.json("run", "committer")["run"]
        wait_status(client, run, "completed")
        runs.append(run)

    def on_origin() -> set[str]:
        listed = subprocess.run(
            ["git", "ls-remote", "--refs", str(client.origin), "refs/flowdrop/runs/*"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        return {line.split()[-1].rsplit("/", 1)[-1] for line in listed.splitlines()}

    wait_for("both runs' refs on the origin", lambda: set(runs) <= on_origin())
    pruned = client.json("prune", "--keep", "0")
    assert [d["run"] for d in pruned["delete"]] == [runs[0]], pruned
    assert runs[0] not in on_origin() and runs[1] in on_origin()


COMMITTER = """
    import subprocess
    from flowdrop_tui import flow

    @flow()
    def main(run):
        for r in run.rounds(["one"]):
            with open("made-by-the-run.txt", "w") as out:
                out.write("made on the worker\\n")
            git = ["git", "-c", "user.name=run", "-c", "user.email=run@x"]
            subprocess.run([*git, "add", "made-by-the-run.txt"], check=True)
            subprocess.run([*git, "commit", "-qm", "the run's commit"], check=True)
        return "done"
"""


def test_a_runs_commits_reach_the_origin_and_its_worktree_goes(
    cluster: Cluster, space: str, tmp_path: Path
) -> None:
    """Guards against a run's commits dying with the worker's worktree (they are kept
    at refs/flowdrop/runs/<run> on the origin), and against worktrees piling up."""
    worker = cluster.start_worker("a")
    client = make_client(cluster, space, tmp_path)
    client.add_flow("committer", COMMITTER)
    worker.wait_polling()
    run = client.json("run", "committer")["run"]
    shown = wait_status(client, run, "completed")
    assert shown["result"] == "done"
    ref = f"refs/flowdrop/runs/{run}"
    kept = wait_for(
        "the run's ref on the origin",
        lambda: subprocess.run(
            ["git", "log", "-1", "--format=%s", ref], cwd=client.origin, capture_output=True
        ).stdout.strip(),
    )
    assert kept == b"the run's commit"
    trees = worker.home / "flowdrop-worker" / "worktrees"
    wait_for("the worktree let go", lambda: not any(trees.iterdir()))
    # Parked warm for the next run of the space (worktrees.py), one per ended run at
    # most PARK_MAX: never one per run.
    parked = list((worker.home / "flowdrop-worker" / "parked").glob("*/*/*"))
    assert len(parked) == 1


def test_a_stopping_worker_stops_its_runs_after_their_round(
    cluster: Cluster, space: str, tmp_path: Path
) -> None:
    """Guards against SIGTERM to a worker leaving its runs to be reaped as lost (or
    killing them mid-round): they stop after their round, cancelled, and it exits 0."""
    worker = cluster.start_worker("a")
    client = make_client(cluster, space, tmp_path)
    gate = tmp_path / "gate"
    gate.mkdir()
    client.add_flow("gated", gated(gate))
    worker.wait_polling()
    run = client.json("run", "gated")["run"]
    wait_for("round 1", lambda: status(client, run) == "running")
    worker.process.terminate()  # SIGTERM to the worker alone
    wait_for("the stop asked", lambda: "stopping" in worker.text())
    (gate / "go-1").touch()
    assert worker.process.wait(timeout=60) == 0
    shown = wait_status(client, run, "cancelled")
    assert shown["last_round"] == 1


def test_a_run_whose_worker_died_alone_is_fenced_out_when_reaped(
    cluster: Cluster, space: str, tmp_path: Path
) -> None:
    """Guards against two writers for one key: the worker process is killed but its
    run child lives on (it leads its own group); once the run is reaped, the child's
    next write is refused (fenced) and it ends itself, writing nothing more."""
    first = cluster.start_worker("a", max_runs=1)
    client = make_client(cluster, space, tmp_path)
    client.add_flow("counter", COUNTER)
    first.wait_polling()
    run = client.json("run", "counter")["run"]
    assert holder(cluster, space, run) == "a"
    reaper = cluster.start_worker("b", max_runs=1)  # a lost run is reaped by a live worker
    reaper.wait_polling()
    wait_for("a saved round", lambda: client.json("show", run)["state"].get("counter"))
    # The run's child (the worker's other child is the warm process kept for its next
    # start, which ends with it).
    with PostgresStore(cluster.postgres, space) as rows:
        child = int((rows.run_info(run) or {})["pid"])
    assert child in first.children()
    cluster.orphans.append(child)  # killed after the test if it is still there
    os.killpg(first.process.pid, signal.SIGKILL)  # the worker alone
    first.process.wait(timeout=10)
    assert Path(f"/proc/{child}").exists()  # its run goes on, for now
    wait_status(client, run, "interrupted", timeout=HEARTBEAT_TIMEOUT.seconds + 30)
    store = PostgresStore(cluster.postgres, space)
    try:
        reaped = {p: store.read_file(run, p) for p in ("cycle.jsonl", "state.json")}
        wait_for("the fenced child gone", lambda: not _alive(child), timeout=30)
        assert {p: store.read_file(run, p) for p in reaped} == reaped  # not one more write
    finally:
        store.close()


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] != "Z"
