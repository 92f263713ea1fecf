"""SPEC §10 with real detached processes and real signals (docs/decisions.md, "Stopping
and pausing")."""

from __future__ import annotations

import concurrent.futures
import os
import signal
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

import orjson
import pytest

from tests.conftest import CLI, events, state_of, wait_for, write_flow
from tests.flow_bodies import counts_rounds

LOOP = counts_rounds("round", sleep=0.2)

SLEEPER = """
    import time
    from flowdrop_tui import flow

    @flow(resumable=True)
    def main(run):
        for r in run.rounds():
            run.state["entered"] = r
            time.sleep(300)
"""

# While the file "hold" exists in the workspace, a round waits before finishing: a
# test takes its pause or stop while the run is certainly mid-batch, however slow
# the machine, then lets the round end.
BATCH = """
    import os, time
    from flowdrop_tui import flow

    @flow()
    def main(run):
        done = run.state.setdefault("done", [])
        for item in run.rounds(["a", "b", "c", "d", "e", "f"]):
            time.sleep(0.05)
            while os.path.exists("hold"):
                time.sleep(0.02)
            run.state["done"] = [*run.state["done"], item]
        return run.state["done"]
"""


def hold(ws: Path) -> Path:
    gate = ws / "hold"
    gate.write_text("")
    return gate


STUBBORN = """
    import signal, time
    from flowdrop_tui import flow

    @flow()
    def main(run):
        for r in run.rounds():
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            run.state["r"] = r
            time.sleep(300)
"""


def status(cli: CLI, run_id: str) -> str:
    return str(cli.json("show", run_id)["status"])


def detach(cli: CLI, flow: str, *extra: str) -> str:
    out = cli.json("run", flow, "--detach", *extra)
    assert set(out) == {"run", "flow", "warnings"} and out["warnings"] == []
    return str(out["run"])


def started(ws: Path, run_id: str, rounds: int = 1) -> None:
    wait_for(lambda: sum(e["event"] == "round_started" for e in events(ws, run_id)) >= rounds)


def test_detach_returns_at_once_and_the_run_outlives_its_starter(workspace: Path, cli: CLI) -> None:
    write_flow(workspace, "loop", LOOP)
    run_id = detach(cli, "loop")
    started(workspace, run_id, 2)
    assert status(cli, run_id) == "running"
    out = workspace / ".flowdrop" / "runs" / run_id / "output.log"
    assert out.exists()
    cli("stop", run_id, check=0)
    wait_for(lambda: status(cli, run_id) == "cancelled")


def test_stop_finishes_the_round_in_flight_saves_and_ends_cancelled(
    workspace: Path, cli: CLI
) -> None:
    write_flow(workspace, "loop", LOOP)
    run_id = detach(cli, "loop")
    started(workspace, run_id, 2)
    cli("stop", run_id, "--wait", check=0)
    evs = events(workspace, run_id)
    assert status(cli, run_id) == "cancelled"
    request = next(e for e in evs if e["event"] == "stop_requested")
    assert request["now"] is False and request["by"]["pid"] > 0 and request["by"]["via"] == "cli"
    ends = [e for e in evs if e["event"] == "round_ended"]
    starts = [e for e in evs if e["event"] == "round_started"]
    assert len(ends) == len(starts) and all(e["outcome"] == "ok" for e in ends)
    assert state_of(workspace, run_id)["loop"]["round"] == starts[-1]["round"]
    assert evs[-1]["event"] == "ended" and evs[-1]["outcome"] == "cancelled"


def test_stop_now_interrupts_a_sleeping_round_within_seconds(workspace: Path, cli: CLI) -> None:
    """Guards escape-twice: SIGINT to the group; state saved; cancelled, not interrupted."""
    write_flow(workspace, "sleeper", SLEEPER)
    run_id = detach(cli, "sleeper")
    started(workspace, run_id)
    began = time.monotonic()
    cli("stop", run_id, "--now", "--wait", check=0)
    took = time.monotonic() - began
    assert status(cli, run_id) == "cancelled"
    assert took < 9  # far under the 300 s round (not a speed goal: a did-it-interrupt check)
    evs = events(workspace, run_id)
    assert any(e["event"] == "stop_requested" and e["now"] for e in evs)
    assert state_of(workspace, run_id)["sleeper"]["entered"] == 1
    assert [e["outcome"] for e in evs if e["event"] == "round_ended"] == ["stopped"]


def test_second_stop_escalates_to_now(workspace: Path, cli: CLI) -> None:
    write_flow(workspace, "sleeper", SLEEPER)
    run_id = detach(cli, "sleeper")
    started(workspace, run_id)
    first = cli("stop", run_id, check=0)
    assert "after round 1" in first.stdout
    wait_for(lambda: any(e["event"] == "stop_requested" for e in events(workspace, run_id)))
    second = cli("stop", run_id, "--wait", check=0)
    assert "now" in second.stdout
    assert status(cli, run_id) == "cancelled"


def test_pause_mid_batch_then_resume_at_the_next_item_in_the_same_run(
    workspace: Path, cli: CLI
) -> None:
    """Guards SG-12 clause 3: a pause taken mid-loop resumes there, same record."""
    write_flow(workspace, "batch", BATCH)
    gate = hold(workspace)
    run_id = detach(cli, "batch")
    started(workspace, run_id)
    cli("pause", run_id, check=0)
    wait_for(lambda: any(e["event"] == "pause_requested" for e in events(workspace, run_id)))
    gate.unlink()
    wait_for(lambda: status(cli, run_id) == "paused")
    paused = [e for e in events(workspace, run_id) if e["event"] == "paused"][-1]
    done_at_pause = state_of(workspace, run_id)["batch"]["done"]
    assert paused["position"]["iterator"] == len(done_at_pause)
    assert paused["position"]["iterationCount"] == len(done_at_pause)
    assert 1 <= len(done_at_pause) < 6
    # A second pause of a paused run, and a stop of it, are handled; resume continues it.
    assert cli("pause", run_id).returncode == 3
    out = cli("resume", run_id, "--json")
    assert out.returncode == 0, out.stderr
    final = orjson.loads(out.stdout)
    assert final["run"] == run_id and final["status"] == "completed"
    assert final["result"] == ["a", "b", "c", "d", "e", "f"]
    rounds = [e["round"] for e in events(workspace, run_id) if e["event"] == "round_started"]
    assert rounds == list(range(1, len(rounds) + 1)) and len(rounds) == 6
    items = [e["index"] for e in events(workspace, run_id) if e["event"] == "round_started"]
    assert items == [0, 1, 2, 3, 4, 5]
    assert [e["event"] for e in events(workspace, run_id)].count("resumed") == 1


def test_plain_run_of_a_paused_thread_resumes_it(workspace: Path, cli: CLI) -> None:
    write_flow(workspace, "batch", BATCH.replace("@flow()", "@flow(resumable=True)"))
    gate = hold(workspace)
    run_id = detach(cli, "batch")
    started(workspace, run_id)
    cli("pause", run_id, check=0)
    gate.unlink()
    wait_for(lambda: status(cli, run_id) == "paused")
    out = cli.json("run", "batch")
    assert out["run"] == run_id and out["status"] == "completed"


def test_second_pause_while_pending_is_refused_with_its_code(workspace: Path, cli: CLI) -> None:
    write_flow(workspace, "sleeper", SLEEPER)
    run_id = detach(cli, "sleeper")
    started(workspace, run_id)
    try:
        assert cli("pause", run_id).returncode == 0
        again = cli("pause", run_id, "--json")
        assert again.returncode == 3
        assert orjson.loads(again.stdout)["error"]["code"] == "INWARD_SIGNAL_ALREADY_PENDING"
    finally:
        cli("stop", run_id, "--now", "--wait")


def test_resume_of_a_running_run_is_refused_no_active_pause(workspace: Path, cli: CLI) -> None:
    write_flow(workspace, "loop", LOOP)
    run_id = detach(cli, "loop")
    started(workspace, run_id)
    try:
        done = cli("resume", run_id, "--json")
        assert done.returncode == 3
        assert orjson.loads(done.stdout)["error"]["code"] == "NO_ACTIVE_PAUSE"
    finally:
        cli("stop", run_id, "--now", "--wait")


def test_stop_pause_resume_of_a_finished_run_are_refused_pipeline_terminal(
    workspace: Path, cli: CLI
) -> None:
    write_flow(
        workspace,
        "quick",
        """
        from flowdrop_tui import flow

        @flow()
        def main(run):
            run.state["x"] = 1
    """,
    )
    run_id = cli.json("run", "quick")["run"]
    for command in (
        ["stop", run_id],
        ["stop", run_id, "--now"],
        ["pause", run_id],
        ["resume", run_id],
    ):
        done = cli(*command, "--json")
        assert done.returncode == 3, command
        assert orjson.loads(done.stdout)["error"]["code"] == "PIPELINE_TERMINAL"


def test_stop_of_a_paused_run_closes_it_cancelled_without_running_it(
    workspace: Path, cli: CLI
) -> None:
    write_flow(workspace, "batch", BATCH)
    gate = hold(workspace)
    run_id = detach(cli, "batch")
    started(workspace, run_id)
    cli("pause", run_id, check=0)
    gate.unlink()
    wait_for(lambda: status(cli, run_id) == "paused")
    rounds_before = sum(e["event"] == "round_started" for e in events(workspace, run_id))
    cli("stop", run_id, check=0)
    assert status(cli, run_id) == "cancelled"
    evs = events(workspace, run_id)
    assert sum(e["event"] == "round_started" for e in evs) == rounds_before
    assert not any(e["event"] == "resumed" for e in evs)


def test_a_stop_that_keeps_paused_runs_refuses_a_paused_run_and_leaves_it_paused(
    workspace: Path, cli: CLI
) -> None:
    """Guards the UI's escape (docs/decisions.md, "The terminal UI's keys"): ``keep_paused``
    never closes a paused run."""
    from flowdrop_tui.core.control import verbs
    from flowdrop_tui.core.errors import AlreadyPausedError
    from flowdrop_tui.core.paths import Layout

    write_flow(workspace, "batch", BATCH)
    gate = hold(workspace)
    run_id = detach(cli, "batch")
    started(workspace, run_id)
    cli("pause", run_id, check=0)
    gate.unlink()
    wait_for(lambda: status(cli, run_id) == "paused")
    for now in (False, True):
        with pytest.raises(AlreadyPausedError) as refused:
            verbs.stop(Layout(workspace), run_id, now=now, keep_paused=True)
        assert refused.value.code == "ALREADY_PAUSED" and run_id in refused.value.message
    assert status(cli, run_id) == "paused"
    assert not any(e["event"] == "stop_requested" for e in events(workspace, run_id))


def test_kill_9_then_resume_is_refused_and_plain_run_picks_up(workspace: Path, cli: CLI) -> None:
    write_flow(workspace, "loop", LOOP)
    run_id = detach(cli, "loop")
    started(workspace, run_id, 3)
    pid = cli.json("show", run_id)["pid"]
    os.kill(pid, signal.SIGKILL)
    wait_for(lambda: status(cli, run_id) == "interrupted")
    refused = cli("run", "loop", "--resume", run_id, "--json")
    assert refused.returncode == 3
    error = orjson.loads(refused.stdout)["error"]
    assert run_id in error["message"] and "interrupted" in error["message"]
    assert cli("resume", run_id).returncode == 3
    last = max(e["round"] for e in events(workspace, run_id) if e["event"] == "round_started")
    new_id = detach(cli, "loop")
    started(workspace, new_id)
    created = events(workspace, new_id)[0]
    assert created["source"] == run_id and created["first_round"] == last + 1
    cli("stop", new_id, "--now", "--wait")


def test_ten_concurrent_detached_starts_leave_exactly_one_running(
    workspace: Path, cli: CLI
) -> None:
    write_flow(workspace, "loop", LOOP)
    cli.json("flows")  # describe once so the ten race on the start, not on the cache

    def start(_: int) -> subprocess.CompletedProcess[str]:
        return cli("run", "loop", "--detach", "--json")

    with concurrent.futures.ThreadPoolExecutor(10) as pool:
        results = list(pool.map(start, range(10)))
    codes = sorted(r.returncode for r in results)
    assert codes == [0] + [3] * 9, [(r.returncode, r.stderr) for r in results]
    winner = next(orjson.loads(r.stdout)["run"] for r in results if r.returncode == 0)
    for loser in (r for r in results if r.returncode == 3):
        error = orjson.loads(loser.stdout)["error"]
        assert error["code"] == "ALREADY_RUNNING"
    runs = cli.json("runs", "loop")
    assert [r["run"] for r in runs] == [winner]
    cli("stop", winner, "--now", "--wait")


def test_a_flow_ignoring_sigint_is_killed_after_the_grace_and_shows_interrupted(
    workspace: Path, cli: CLI
) -> None:
    """Guards §10: the run enforces the 10 s limit itself, even if the asker is gone."""
    write_flow(workspace, "stubborn", STUBBORN)
    run_id = detach(cli, "stubborn")
    started(workspace, run_id)
    time.sleep(0.3)  # let the flow install SIG_IGN
    cli("stop", run_id, "--now", check=0)
    wait_for(lambda: status(cli, run_id) == "interrupted", timeout=40)
    evs = events(workspace, run_id)
    assert any(e["event"] == "killing" for e in evs)
    assert not any(e["event"] == "ended" for e in evs)
    assert state_of(workspace, run_id)["stubborn"]["r"] == 1


def test_foreground_ctrl_c_stops_after_round_then_again_stops_now(
    workspace: Path, cli: CLI
) -> None:
    """Guards 'Ctrl-C = escape': first SIGINT stops after the round, the second at once."""
    write_flow(workspace, "sleeper", SLEEPER)
    proc = cli.start("run", "sleeper")
    runs_dir = workspace / ".flowdrop" / "runs"
    run_id = wait_for(lambda: [p.name for p in runs_dir.glob("2*")] if runs_dir.exists() else [])[0]
    started(workspace, run_id)
    proc.send_signal(signal.SIGINT)
    wait_for(lambda: any(e["event"] == "stop_requested" for e in events(workspace, run_id)))
    assert proc.poll() is None  # still in its round
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=30) == 130
    _, err = proc.communicate()
    assert "again to stop now" in err
    assert status(cli, run_id) == "cancelled"


def test_sigterm_ends_a_run_cancelled_with_state_saved(workspace: Path, cli: CLI) -> None:
    """Guards SIGTERM as a stop: the run ends cancelled and its state is saved."""
    write_flow(workspace, "sleeper", SLEEPER)
    run_id = detach(cli, "sleeper")
    started(workspace, run_id)
    os.kill(cli.json("show", run_id)["pid"], signal.SIGTERM)
    wait_for(lambda: status(cli, run_id) == "cancelled")
    # SPEC §5.2: saved when the run ends, however it ends: the round cut short had set
    # "entered", and state.json itself holds it (the log folded in and removed).
    assert state_of(workspace, run_id) == {"sleeper": {"entered": 1}}
    folder = workspace / ".flowdrop" / "runs" / run_id
    assert orjson.loads((folder / "state.json").read_bytes()) == {"sleeper": {"entered": 1}}
    assert not (folder / "state.log").exists()


def test_stop_requested_lets_a_flow_end_a_long_round_early(workspace: Path, cli: CLI) -> None:
    write_flow(
        workspace,
        "polite",
        """
        import time
        from flowdrop_tui import flow

        @flow()
        def main(run):
            for r in run.rounds():
                for _ in range(600):
                    if run.stop_requested:
                        run.state["left_early"] = True
                        break
                    time.sleep(0.05)
    """,
    )
    run_id = detach(cli, "polite")
    started(workspace, run_id)
    cli("stop", run_id, "--wait", check=0)
    assert status(cli, run_id) == "cancelled"
    assert state_of(workspace, run_id)["polite"]["left_early"] is True


def test_viewers_never_stop_runs(workspace: Path, cli: CLI) -> None:
    """Guards 'runs outlive their viewers': listing, showing, a killed viewer change nothing."""
    write_flow(workspace, "loop", LOOP)
    run_id = detach(cli, "loop")
    started(workspace, run_id)
    viewer = subprocess.Popen(
        [sys.executable, "-m", "flowdrop_tui", "flows", "--json"],
        cwd=workspace,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    viewer.kill()
    viewer.wait()
    for _ in range(3):
        cli.json("flows")
        cli.json("runs")
        cli.json("show", run_id)
    assert status(cli, run_id) == "running"
    cli("stop", run_id, "--now", "--wait")


@pytest.mark.slow
def test_stop_now_latency_median_of_ten(workspace: Path, cli: CLI) -> None:
    """Not a speed goal (bench/ has those): records the figure for the closing note."""
    write_flow(workspace, "sleeper", SLEEPER)
    took = []
    for _ in range(10):
        run_id = detach(cli, "sleeper", "--fresh")
        started(workspace, run_id)
        began = time.monotonic()
        cli("stop", run_id, "--now", "--wait", check=0)
        took.append(time.monotonic() - began)
        assert status(cli, run_id) == "cancelled"
    print(f"stop --now median {statistics.median(took):.3f}s over 10: {sorted(took)}")


def test_a_detached_resume_records_who_asked_not_the_background_process(
    workspace: Path, cli: CLI
) -> None:
    write_flow(workspace, "batch", BATCH)
    gate = hold(workspace)
    run_id = detach(cli, "batch")
    started(workspace, run_id)
    cli("pause", run_id, check=0)
    gate.unlink()
    wait_for(lambda: status(cli, run_id) == "paused")
    assert cli.json("resume", run_id, "--detach") == {
        "run": run_id,
        "flow": "batch",
        "warnings": [],
    }
    wait_for(lambda: status(cli, run_id) == "completed")
    resumed = next(e for e in events(workspace, run_id) if e["event"] == "resumed")
    assert resumed["by"]["via"] == "cli"
    assert resumed["by"]["pid"] != resumed["pid"]  # the asker, not the resuming process
    asked = next(e for e in events(workspace, run_id) if e["event"] == "pause_requested")
    assert not asked["by"]["user"].isdigit()  # a user name, even without a terminal


def test_a_request_is_never_seen_half_written(workspace: Path) -> None:
    """Guards who-asked against a run reading a request file between its creation and
    its content (the run saw ``by == {}`` and recorded a stop nobody asked for by name)."""
    from flowdrop_tui.core.control import requests

    run_dir = workspace / "run"
    run_dir.mkdir()
    inbox = requests.Inbox(run_dir)
    seen: list[requests.Request] = []
    stop = threading.Event()

    def read() -> None:
        while not stop.is_set():
            seen.extend(inbox.take())

    reader = threading.Thread(target=read)
    reader.start()
    try:
        for n in range(300):
            while not requests.post(run_dir, requests.STOP, {"pid": n, "via": "cli"}):
                pass  # the last one is still pending: the reader takes it
    finally:
        stop.set()
        reader.join()
    seen.extend(inbox.take())
    assert len(seen) == 300 and all(isinstance(r.by.get("pid"), int) for r in seen)
    assert not any(name.endswith(".draft") for name in os.listdir(run_dir / "requests"))
