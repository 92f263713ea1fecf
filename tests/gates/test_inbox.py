"""SPEC §21: ``inbox`` lists what waits on a person — each kind, with its action and its
command — and ``--dismiss`` keeps an item out; real runs, real records."""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta
from pathlib import Path

import orjson
import pytest

from flowdrop_tui.core import inbox
from flowdrop_tui.core.files import locks
from flowdrop_tui.core.paths import Layout
from flowdrop_tui.core.records.log.event_log import EventLog
from tests.conftest import CLI, wait_for, write_flow
from tests.gates.test_ask_answer import paused_on_question, released

CAPPED = """
    from flowdrop_tui import flow

    @flow(budget={"rounds": 2})
    def main(run):
        for n in run.rounds():
            run.state["n"] = n
"""

FAILS = """
    from flowdrop_tui import flow

    @flow()
    def main(run):
        raise RuntimeError("the tests are red")
"""

FOREVER = """
    import time
    from flowdrop_tui import flow

    @flow()
    def main(run):
        for _ in run.rounds():
            time.sleep(0.05)
"""

SHAPE = {"id", "kind", "run", "flow", "message", "at", "action", "command"}


def by_kind(cli: CLI) -> dict[str, dict[str, object]]:
    found = cli.json("inbox")
    assert all(set(item) >= SHAPE for item in found)
    return {str(item["kind"]): item for item in found}


def run_id_of(cli: CLI, flow: str) -> str:
    return str(cli.json("runs", flow)[0]["run"])


def test_the_inbox_lists_each_kind_with_its_action_and_command(cli: CLI, workspace: Path) -> None:
    asked = paused_on_question(cli, workspace)
    write_flow(workspace, "capped", CAPPED)
    cli("run", "capped", check=0)
    write_flow(workspace, "red", FAILS)
    cli("run", "red", check=1)
    write_flow(workspace, "forever", FOREVER)
    killed = str(cli.json("run", "forever", "--detach")["run"])
    pid = locks.holder_pid(workspace / ".flowdrop" / "runs" / killed / "live.lock")
    assert pid is not None
    os.killpg(pid, 9)
    wait_for(lambda: released(workspace, killed))

    items = by_kind(cli)
    assert set(items) == {"gate", "budget_reached", "failed", "interrupted"}
    gate = items["gate"]
    assert gate["run"] == asked and gate["action"] == "answer"
    assert gate["command"] == f"flowdrop-tui answer {asked} ANSWER --gate {gate['gate']}"
    assert gate["choices"] == ["yes", "no"] and "ship 0?" in str(gate["message"])
    budget = items["budget_reached"]
    capped = run_id_of(cli, "capped")
    assert budget["command"] == f"flowdrop-tui resume {capped} --max-rounds 4"
    assert budget["action"] == "raise the budget and resume"
    assert items["failed"]["command"] == "flowdrop-tui run red"
    assert "the tests are red" in str(items["failed"]["message"])
    assert items["interrupted"]["run"] == killed
    assert items["interrupted"]["action"] == "pick up"

    # the command it gives is the one that acts: the budget raised, the run goes on —
    # to its new limit, where it is a new item
    cli(*str(budget["command"]).split()[1:], check=0)
    again = by_kind(cli)["budget_reached"]
    assert again["id"] == f"{capped}/budget-2" != budget["id"]
    assert again["command"] == f"flowdrop-tui resume {capped} --max-rounds 8"

    text = cli("inbox", check=0).stdout
    assert f"flowdrop-tui answer {asked} ANSWER" in text


def paused_run(cli: CLI, workspace: Path) -> str:
    """A real run paused by a person (nothing waits on anyone: not in the inbox)."""
    write_flow(workspace, "capped", CAPPED.replace('"rounds": 2', '"rounds": 1'))
    cli("run", "capped", check=0)
    return run_id_of(cli, "capped")


@pytest.mark.parametrize("cause", ["stalled", "same_failure", "limit_reached"])
def test_runs_paused_by_a_stall_a_repeated_failure_or_a_usage_limit_are_listed(
    cli: CLI, workspace: Path, cause: str
) -> None:
    """``stalled``/``same_failure`` (SPEC §20) and ``limit_reached`` (§19), read from the
    record's events by name: a record written with the real EventLog."""
    run_id = paused_run(cli, workspace)
    run_dir = workspace / ".flowdrop" / "runs" / run_id
    locks.acquire(run_dir / "live.lock", content=str(os.getpid()))  # the test holds the run
    log = EventLog(run_dir / "cycle.jsonl")
    log.append("resumed", pid=os.getpid(), pgid=os.getpgrp(), by={"via": "test"})
    fields: dict[str, object] = (
        {"rounds": [2, 3, 4, 5, 6], "limit": 5}  # the rounds compared, as SPEC §20 records them
        if cause != "limit_reached"
        else {"backend": "claude", "until": None}
    )
    log.append(cause, **fields)
    log.commit("paused", position=None, round=1)
    log.close()
    locks.release(run_dir / "live.lock")
    [item] = [i for i in cli.json("inbox") if i["run"] == run_id]
    assert item["kind"] == cause and item["id"] == f"{run_id}/{cause}-2"
    assert item["command"] == f"flowdrop-tui resume {run_id}"
    if cause != "limit_reached":
        assert "5 rounds" in str(item["message"])


def test_a_long_limit_wait_is_listed_only_once_it_is_long(cli: CLI, workspace: Path) -> None:
    run_id = paused_run(cli, workspace)
    layout = Layout(workspace)
    run_dir = workspace / ".flowdrop" / "runs" / run_id
    locks.acquire(run_dir / "live.lock", content=str(os.getpid()))  # live: held by the test
    try:
        log = EventLog(run_dir / "cycle.jsonl")
        log.append("resumed", pid=os.getpid(), pgid=os.getpgrp(), by={"via": "test"})
        log.append("limit_wait", backend="claude", until=None, source="test", key="capped")
        log.close()
        assert [i for i in inbox.items(layout, send=False) if i["run"] == run_id] == []
        later = (datetime.now(UTC) + timedelta(minutes=11)).isoformat().replace("+00:00", "Z")
        [item] = [i for i in inbox.items(layout, send=False, now=later) if i["run"] == run_id]
        assert item["kind"] == "limit_wait" and "claude" in str(item["message"])
    finally:
        locks.release(run_dir / "live.lock")


def test_dismiss_keeps_an_item_out_and_refuses_what_is_not_listed(
    cli: CLI, workspace: Path
) -> None:
    write_flow(workspace, "red", FAILS)
    cli("run", "red", check=1)
    [item] = cli.json("inbox")
    assert cli.json("inbox", "--dismiss", str(item["id"])) == {"dismissed": [item["id"]]}
    assert cli.json("inbox") == []
    kept = orjson.loads((workspace / ".flowdrop" / "inbox.json").read_bytes())
    assert kept == {"v": 1, "dismissed": [item["id"]]}
    again = orjson.loads(cli("inbox", "--dismiss", str(item["id"]), "--json", check=2).stdout)
    assert again["error"]["code"] == "NOT_FOUND"
    cli("run", "red", check=1)  # a new failure is a new item
    assert len(cli.json("inbox")) == 1
    assert cli("inbox", check=0).stdout.count("flowdrop-tui run red") == 1


def test_a_link_planted_as_inbox_json_is_never_written_through(
    cli: CLI, workspace: Path, tmp_path: Path
) -> None:
    write_flow(workspace, "red", FAILS)
    cli("run", "red", check=1)
    [item] = cli.json("inbox")
    target = tmp_path / "elsewhere.json"
    target.write_text("{}")
    (workspace / ".flowdrop" / "inbox.json").symlink_to(target)
    done = orjson.loads(cli("inbox", "--dismiss", str(item["id"]), "--json", check=3).stdout)
    assert done["error"]["code"] == "RECORDS_UNWRITABLE"
    assert target.read_text() == "{}"


def test_an_empty_inbox_says_so(cli: CLI, workspace: Path) -> None:
    assert cli.json("inbox") == []
    assert cli("inbox", check=0).stdout.strip() == "nothing waits on you"


SPINS = """
from flowdrop_tui import flow

@flow(resumable=True, stall=2, stall_on="all")
def main(run):
    for _ in run.rounds():
        pass
"""


def test_a_loop_that_stalled_is_in_the_inbox_with_its_rounds(cli: CLI, workspace: Path) -> None:
    """Guards the inbox against the real ``stalled`` pause (SPEC §20 → §21): a loop that
    changes nothing pauses itself, and the inbox says so, how long, and how to go on."""
    write_flow(workspace, "spins", SPINS)
    cli("run", "spins", check=0)
    run_id = run_id_of(cli, "spins")
    assert cli.json("show", run_id)["paused_by"]["kind"] == "stalled"
    [item] = [i for i in cli.json("inbox") if i["run"] == run_id]
    assert item["kind"] == "stalled" and "for 2 rounds" in str(item["message"])
    assert item["command"] == f"flowdrop-tui resume {run_id}"


def test_a_pause_behind_a_stop_the_run_has_not_taken_yet_is_refused(
    cli: CLI, workspace: Path
) -> None:
    """Guards INWARD_SIGNAL_ALREADY_PENDING in the moment between `stop` and the run
    taking it (its request file is there, its record does not say it yet): a `pause`
    then was let through under load. The test holds the run, so nothing takes it."""
    run_id = paused_run(cli, workspace)
    run_dir = workspace / ".flowdrop" / "runs" / run_id
    locks.acquire(run_dir / "live.lock", content=str(os.getpid()))
    try:
        log = EventLog(run_dir / "cycle.jsonl")
        log.append("resumed", pid=os.getpid(), pgid=os.getpgrp(), by={"via": "test"})
        log.close()
        assert cli.json("stop", run_id)["action"] == "stop"
        refused = cli.json("pause", run_id, check=3)
        assert refused["error"]["code"] == "INWARD_SIGNAL_ALREADY_PENDING"
        assert "a stop pending" in refused["error"]["message"]
    finally:
        locks.release(run_dir / "live.lock")
