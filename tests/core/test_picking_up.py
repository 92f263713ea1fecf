"""SPEC §7 through the real command: where a run's starting state comes from."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import orjson
import pytest

from tests.conftest import CLI, events, state_of, wait_for, write_flow

COUNTER = """
    from flowdrop_tui import flow

    @flow(resumable=True, description="counts")
    def main(run):
        for r in run.rounds(range(3)):
            run.state["count"] = run.state.get("count", 0) + 1
            run.state["last"] = run.round
        return run.state["count"]
"""

FRESH_ONLY = """
    from flowdrop_tui import flow

    @flow(description="never picked up")
    def main(run):
        for r in run.rounds(range(2)):
            run.state["count"] = run.state.get("count", 0) + 1
"""

SLOW = """
    import time
    from flowdrop_tui import flow

    @flow(resumable=True)
    def main(run):
        for r in run.rounds():
            run.state["round_seen"] = run.round
            run.state["count"] = run.state.get("count", 0) + 1
            time.sleep(0.05)
"""


def runs_json(cli: CLI, flow: str | None = None) -> list[dict]:
    return cli.json("runs", *([flow] if flow else []))


def run_ids(ws: Path) -> list[str]:
    folder = ws / ".flowdrop" / "runs"
    return (
        sorted(p.name for p in folder.iterdir() if not p.name.startswith("."))
        if folder.exists()
        else []
    )


def test_fresh_then_thread_pick_up_carries_state_and_rounds(workspace: Path, cli: CLI) -> None:
    """Guards SG-12 step 4: a resumable flow's plain run continues its thread."""
    write_flow(workspace, "counter", COUNTER)
    first = cli.json("run", "counter")
    assert first["status"] == "completed" and first["start"] == "fresh"
    assert (first["first_round"], first["last_round"]) == (1, 3)
    second = cli.json("run", "counter")
    assert second["start"] == "thread" and second["picked_up_from"] == first["run"]
    assert (second["first_round"], second["last_round"]) == (4, 6)
    assert state_of(workspace, second["run"]) == {"counter": {"count": 6, "last": 6}}
    # The earlier run's record is untouched: state goes in the run doing the writing.
    assert state_of(workspace, first["run"]) == {"counter": {"count": 3, "last": 3}}
    assert second["result"] == 6


def test_every_run_writes_its_starting_state_at_creation(workspace: Path, cli: CLI) -> None:
    """Guards rule 4: the record shows what it worked from even if it sets nothing."""
    write_flow(
        workspace,
        "idle",
        """
        from flowdrop_tui import flow

        @flow(resumable=True)
        def main(run):
            if not run.state:
                run.state["seed"] = 1
    """,
    )
    a = cli.json("run", "idle")
    b = cli.json("run", "idle")
    assert state_of(workspace, a["run"]) == {"idle": {"seed": 1}}
    assert state_of(workspace, b["run"]) == {"idle": {"seed": 1}}


def test_pick_up_is_not_gated_by_how_the_last_run_ended(workspace: Path, cli: CLI) -> None:
    """Guards INT-14 clause 3: a failed or cancelled run is picked up like a completed one."""
    write_flow(
        workspace,
        "flaky",
        """
        from flowdrop_tui import flow

        @flow(resumable=True)
        def main(run):
            run.state["tries"] = run.state.get("tries", 0) + 1
            if run.state["tries"] == 1:
                raise ValueError("first try fails")
            return run.state["tries"]
    """,
    )
    failed = cli("run", "flaky", "--json")
    assert failed.returncode == 1
    assert orjson.loads(failed.stdout)["status"] == "failed"
    ok = cli.json("run", "flaky")
    assert ok["status"] == "completed" and ok["result"] == 2
    assert ok["picked_up_from"] == orjson.loads(failed.stdout)["run"]


def test_emptied_state_stops_the_search_and_the_chain_goes_on(workspace: Path, cli: CLI) -> None:
    """Guards rule 5: clear() says start clean — not the state of the run before."""
    write_flow(
        workspace,
        "reset",
        """
        from flowdrop_tui import flow

        @flow(resumable=True)
        def main(run):
            for r in run.rounds(range(1)):
                if run.state.get("n", 0) >= 2:
                    run.state.clear()
                else:
                    run.state["n"] = run.state.get("n", 0) + 1
            return dict(run.state)
    """,
    )
    a = cli.json("run", "reset")
    b = cli.json("run", "reset")
    c = cli.json("run", "reset")  # clears
    d = cli.json("run", "reset")
    assert [x["result"] for x in (a, b, c, d)] == [{"n": 1}, {"n": 2}, {}, {"n": 1}]
    assert d["picked_up_from"] == c["run"] and d["start"] == "thread"
    assert d["first_round"] == 4  # round numbers go on


def test_fresh_starts_a_new_chain(workspace: Path, cli: CLI) -> None:
    write_flow(workspace, "counter", COUNTER)
    cli.json("run", "counter")
    fresh = cli.json("run", "counter", "--fresh")
    assert fresh["start"] == "fresh" and fresh["picked_up_from"] is None
    assert fresh["first_round"] == 1
    assert state_of(workspace, fresh["run"]) == {"counter": {"count": 3, "last": 3}}


def test_non_resumable_flow_is_always_fresh_and_from_is_refused(workspace: Path, cli: CLI) -> None:
    """Guards 'read by running the flow today': no resumable, no pick-up."""
    write_flow(workspace, "once", FRESH_ONLY)
    a = cli.json("run", "once")
    b = cli.json("run", "once")
    assert b["start"] == "fresh" and b["first_round"] == 1
    assert state_of(workspace, b["run"]) == {"once": {"count": 2}}
    refused = cli("run", "once", "--from", a["run"], "--json")
    assert refused.returncode == 3
    assert orjson.loads(refused.stdout)["error"]["code"] == "NOT_RESUMABLE"


def test_resumability_is_read_from_the_flow_today(workspace: Path, cli: CLI) -> None:
    """A flow that stops declaring resumable starts fresh, whatever its old runs recorded."""
    write_flow(workspace, "counter", COUNTER)
    cli.json("run", "counter")
    write_flow(workspace, "counter", COUNTER.replace("resumable=True", "resumable=False"))
    again = cli.json("run", "counter")
    assert again["start"] == "fresh" and again["first_round"] == 1


def test_from_names_a_run_to_pick_up(workspace: Path, cli: CLI) -> None:
    write_flow(workspace, "counter", COUNTER)
    a = cli.json("run", "counter")
    cli.json("run", "counter")
    c = cli.json("run", "counter", "--from", a["run"])
    assert c["start"] == "from" and c["picked_up_from"] == a["run"]
    assert c["first_round"] == 4 and c["result"] == 6


def test_from_unknown_run_is_an_error_never_a_fresh_start(workspace: Path, cli: CLI) -> None:
    write_flow(workspace, "counter", COUNTER)
    done = cli("run", "counter", "--from", "20200101T000000.000Z-abcdef", "--json")
    assert done.returncode == 2
    assert orjson.loads(done.stdout)["error"]["code"] == "NOT_FOUND"
    assert run_ids(workspace) == []


def test_from_a_run_with_no_state_for_this_key_is_an_error(workspace: Path, cli: CLI) -> None:
    write_flow(workspace, "counter", COUNTER)
    write_flow(workspace, "other", COUNTER)
    other = cli.json("run", "other")
    done = cli("run", "counter", "--from", other["run"], "--json")
    assert done.returncode == 2
    assert orjson.loads(done.stdout)["error"]["code"] == "NO_STATE_FOR_KEY"


def test_resume_of_unknown_checkpoint_warns_and_starts_fresh(workspace: Path, cli: CLI) -> None:
    """Guards SG-12 clause 1: an id resolving to nothing is a warning (stderr and record)."""
    write_flow(workspace, "counter", COUNTER)
    cli.json("run", "counter")
    done = cli("run", "counter", "--resume", "20200101T000000.000Z-abcdef", "--json")
    assert done.returncode == 0
    out = orjson.loads(done.stdout)
    assert out["start"] == "fresh" and out["first_round"] == 1
    assert "20200101T000000.000Z-abcdef" in done.stderr and "fresh" in done.stderr
    warnings = [e for e in events(workspace, out["run"]) if e["event"] == "warning"]
    assert warnings and "20200101T000000.000Z-abcdef" in warnings[0]["message"]


@pytest.mark.parametrize("outcome", ["completed", "failed"])
def test_resume_of_an_ended_checkpoint_is_refused_before_any_run(
    workspace: Path, cli: CLI, outcome: str
) -> None:
    """Guards SG-12 clause 1 / INT-14 clause 2: naming the checkpoint and its status."""
    write_flow(
        workspace,
        "f",
        """
        import os
        from flowdrop_tui import flow

        @flow(resumable=True)
        def main(run):
            run.state["x"] = 1
            if os.environ.get("FAIL"):
                raise RuntimeError("asked to fail")
    """,
    )
    env_fail = outcome == "failed"
    done = subprocess.run(
        [os.sys.executable, "-m", "flowdrop_tui", "run", "f", "--json"],
        cwd=workspace,
        capture_output=True,
        text=True,
        env={**os.environ, **({"FAIL": "1"} if env_fail else {})},
    )
    run_id = orjson.loads(done.stdout)["run"]
    before = run_ids(workspace)
    refused = cli("run", "f", "--resume", run_id, "--json")
    assert refused.returncode == 3
    error = orjson.loads(refused.stdout)["error"]
    assert error["code"] == "PIPELINE_TERMINAL"
    assert run_id in error["message"] and outcome in error["message"]
    assert run_ids(workspace) == before
    # INT-14 clause 3: the same checkpoint seeds a new turn when picked up.
    picked = cli.json("run", "f", "--from", run_id)
    assert picked["picked_up_from"] == run_id


def test_snapshot_round_trip_and_terminal_snapshot_refused(
    workspace: Path, cli: CLI, tmp_path: Path
) -> None:
    """Guards INT-14 clause 2 for files: a completed snapshot is refused before a run exists."""
    write_flow(workspace, "counter", COUNTER)
    a = cli.json("run", "counter")
    snap = orjson.loads(cli("snapshot", a["run"], check=0).stdout)
    assert snap["status"] == "completed" and snap["isComplete"] is True
    assert snap["data"] == {"count": 3, "last": 3} and snap["threadId"] == "counter"
    assert snap["metadata"]["round"] == 3 and snap["runId"] == a["run"]
    path = tmp_path / "snap.json"
    path.write_bytes(orjson.dumps(snap))
    before = run_ids(workspace)
    refused = cli("run", "counter", "--snapshot", str(path), "--json")
    assert refused.returncode == 3
    error = orjson.loads(refused.stdout)["error"]
    assert str(path) in error["message"] and "completed" in error["message"]
    assert run_ids(workspace) == before


def test_paused_snapshot_is_restored_untouched_with_its_position(
    workspace: Path, cli: CLI, tmp_path: Path
) -> None:
    """Guards SG-12 clause 3 via --snapshot: the first loop resumes at the saved iterator."""
    write_flow(
        workspace,
        "batch",
        """
        from flowdrop_tui import flow

        @flow(resumable=True)
        def main(run):
            seen = []
            for item in run.rounds(["a", "b", "c", "d"]):
                seen.append(item)
            run.state["seen"] = seen
            return seen
    """,
    )
    snapshot = {
        "runId": "20260817T014455.212Z-9f21ab",
        "threadId": "batch",
        "status": "paused",
        "isComplete": False,
        "error": None,
        "data": {"done": ["a", "b"]},
        "metadata": {"round": 7, "note": "kept"},
        "messages": [{"m": 1}],
        "currentNodeId": "",
        "iterationCount": 2,
        "iterator": 2,
        "extra": "kept too",
    }
    path = tmp_path / "paused.json"
    path.write_bytes(orjson.dumps(snapshot))
    out = cli.json("run", "batch", "--snapshot", str(path))
    assert out["start"] == "snapshot" and out["result"] == ["c", "d"]
    assert out["first_round"] == 8 and out["last_round"] == 9
    assert out["picked_up_from"] == "20260817T014455.212Z-9f21ab"
    assert state_of(workspace, out["run"])["batch"]["done"] == ["a", "b"]
    again = orjson.loads(cli("snapshot", out["run"], check=0).stdout)
    assert again["messages"] == [{"m": 1}] and again["metadata"]["note"] == "kept"
    assert again["extra"] == "kept too" and again["iterationCount"] == 4


@pytest.mark.parametrize(
    ("content", "fragment"),
    [
        (b"{nope", "not valid JSON"),
        (b"[]", "not an object"),
        (b'{"data": {}}', 'no "status"'),
        (b'{"status": "exploded", "data": {}}', "none of"),
        (b'{"status": null, "data": [1]}', '"data" is list'),
    ],
)
def test_unusable_snapshot_is_refused_naming_the_file_and_left_as_is(
    workspace: Path, cli: CLI, tmp_path: Path, content: bytes, fragment: str
) -> None:
    """Guards INT-15: never silently replaced by a fresh start."""
    write_flow(workspace, "counter", COUNTER)
    path = tmp_path / "bad.json"
    path.write_bytes(content)
    done = cli("run", "counter", "--snapshot", str(path), "--json")
    assert done.returncode == 3, done.stderr
    error = orjson.loads(done.stdout)["error"]
    assert error["code"] == "UNUSABLE_STATE" and str(path) in error["message"]
    assert fragment in error["message"]
    assert path.read_bytes() == content
    assert run_ids(workspace) == []


def test_missing_snapshot_file_is_exit_2(workspace: Path, cli: CLI, tmp_path: Path) -> None:
    write_flow(workspace, "counter", COUNTER)
    done = cli("run", "counter", "--snapshot", str(tmp_path / "nope.json"), "--json")
    assert done.returncode == 2
    assert "nope.json" in orjson.loads(done.stdout)["error"]["message"]


def test_corrupt_state_of_the_pick_up_source_is_refused_naming_it(
    workspace: Path, cli: CLI
) -> None:
    """Guards INT-15: a state.json that is not JSON is refused, never replaced by fresh."""
    write_flow(workspace, "counter", COUNTER)
    a = cli.json("run", "counter")
    state_file = workspace / ".flowdrop" / "runs" / a["run"] / "state.json"
    state_file.write_bytes(b'{"counter": {"count": 3,')
    done = cli("run", "counter", "--json")
    assert done.returncode == 3
    error = orjson.loads(done.stdout)["error"]
    assert error["code"] == "UNUSABLE_STATE" and str(state_file) in error["message"]
    assert state_file.read_bytes() == b'{"counter": {"count": 3,'
    assert run_ids(workspace) == [a["run"]]
    assert cli.json("run", "counter", "--fresh")["status"] == "completed"


def test_name_and_path_are_two_keys_with_two_states(workspace: Path, cli: CLI) -> None:
    """Guards the key rule: run by name → 'counter'; by path → 'flows/counter'."""
    write_flow(workspace, "counter", COUNTER)
    by_name = cli.json("run", "counter")
    by_path = cli.json("run", "flows/counter")
    by_file = cli.json("run", "flows/counter/flow.py")
    assert by_name["flow"] == "counter" and by_path["flow"] == "flows/counter"
    assert by_path["start"] == "fresh" and by_path["first_round"] == 1
    assert by_file["flow"] == "flows/counter" and by_file["picked_up_from"] == by_path["run"]
    assert set(state_of(workspace, by_path["run"])) == {"flows/counter"}


def test_path_key_is_relative_to_workspace_whatever_the_cwd(workspace: Path, cli: CLI) -> None:
    write_flow(workspace, "counter", COUNTER)
    sub = workspace / "flows"
    done = cli("run", "counter/flow.py", "--json", cwd=sub, check=0)
    assert orjson.loads(done.stdout)["flow"] == "flows/counter"


def test_kill_9_mid_round_then_next_run_picks_up_one_past_last_started(
    workspace: Path, cli: CLI
) -> None:
    """Guards 'stopped in round 40 says round 41': even a round cut short by a kill counts."""
    write_flow(workspace, "slow", SLOW)
    proc = cli.start("run", "slow")
    run_id = wait_for(lambda: run_ids(workspace) and run_ids(workspace)[0])
    wait_for(lambda: sum(e["event"] == "round_started" for e in events(workspace, run_id)) >= 5)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    killed = events(workspace, run_id)
    last_started = max(e["round"] for e in killed if e["event"] == "round_started")
    assert next(r for r in runs_json(cli) if r["run"] == run_id)["status"] == "interrupted"
    saved = state_of(workspace, run_id)["slow"]  # parseable, a state the flow had set
    assert saved["round_seen"] in (last_started, last_started - 1)
    proc2 = cli.start("run", "slow")
    new_id = wait_for(lambda: len(run_ids(workspace)) == 2 and run_ids(workspace)[1])
    wait_for(lambda: any(e["event"] == "round_started" for e in events(workspace, new_id)))
    proc2.send_signal(signal.SIGINT)
    assert proc2.wait(timeout=30) == 130
    created = events(workspace, new_id)[0]
    assert created["start"] == "thread" and created["source"] == run_id
    assert created["first_round"] == last_started + 1
    first = next(e for e in events(workspace, new_id) if e["event"] == "round_started")
    assert first["round"] == last_started + 1
    assert state_of(workspace, new_id)["slow"]["count"] >= saved["count"]


def test_a_flow_that_cannot_load_is_refused_before_any_run_naming_file_and_line(
    workspace: Path, cli: CLI
) -> None:
    write_flow(
        workspace, "broken", "from flowdrop_tui import flow\n\n@flow(\ndef main(run):\n  pass\n"
    )
    done = cli("run", "broken", "--json")
    assert done.returncode == 1
    message = orjson.loads(done.stdout)["error"]["message"]
    assert "flows/broken/flow.py:" in message and "SyntaxError" in message
    assert run_ids(workspace) == []


def test_a_called_flow_keeps_its_own_key_and_picks_up_its_own_thread(
    workspace: Path, cli: CLI
) -> None:
    """Guards §3: a flow that calls another is two flows; each keeps its own state."""
    write_flow(
        workspace,
        "lint",
        """
        from flowdrop_tui import flow

        @flow(resumable=True)
        def main(run, label="direct"):
            run.state["passes"] = run.state.get("passes", 0) + 1
            run.state["label"] = label
            return run.state["passes"]
    """,
    )
    write_flow(
        workspace,
        "caller",
        """
        from flowdrop_tui import flow

        @flow(resumable=True)
        def main(run):
            got = [run.call("lint", label=f"r{r}") for r in run.rounds(range(2))]
            run.state["got"] = got
            return got
    """,
    )
    a = cli.json("run", "caller")
    assert a["result"] == [1, 2]
    assert state_of(workspace, a["run"]) == {
        "caller": {"got": [1, 2]},
        "lint": {"passes": 2, "label": "r1"},
    }
    lint = cli.json("run", "lint")  # picks up from the caller's run: its own key
    assert lint["picked_up_from"] == a["run"] and lint["result"] == 3
    b = cli.json("run", "caller")
    assert b["result"] == [4, 5]
    assert state_of(workspace, b["run"])["caller"] == {"got": [4, 5]}
    flows = {f["name"]: f for f in cli.json("flows")}
    assert flows["lint"]["last_run"] == b["run"]


def test_live_run_blocks_a_second_start_naming_it(workspace: Path, cli: CLI) -> None:
    write_flow(workspace, "slow", SLOW)
    proc = cli.start("run", "slow")
    run_id = wait_for(lambda: run_ids(workspace) and run_ids(workspace)[0])
    wait_for(lambda: any(e["event"] == "started" for e in events(workspace, run_id)))
    try:
        refused = cli("run", "slow", "--json")
        assert refused.returncode == 3
        error = orjson.loads(refused.stdout)["error"]
        assert error["code"] == "ALREADY_RUNNING" and run_id in error["message"]
        also = cli("run", "slow", "--from", run_id, "--json")
        assert also.returncode == 3
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=30)
