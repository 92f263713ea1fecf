"""Issue 26, what a newcomer tripped on, the core's side: a thread run by path is its own
row (item 1), and picking up from an older run says it forks the thread (item 3).
Through the real command, as a new user would run it."""

from __future__ import annotations

from pathlib import Path

import orjson

from tests.conftest import CLI, events, write_flow

COUNTER = """
    from flowdrop_tui import flow

    @flow(resumable=True, description="counts")
    def main(run):
        for r in run.rounds(range(2)):
            run.state["count"] = run.state.get("count", 0) + 1
        return run.state["count"]
"""


def three_runs(workspace: Path, cli: CLI) -> list[str]:
    write_flow(workspace, "counter", COUNTER)
    return [str(cli.json("run", "counter")["run"]) for _ in range(3)]


def test_plan_from_an_older_run_warns_that_newer_runs_exist_naming_the_newest(
    workspace: Path, cli: CLI
) -> None:
    """Item 3 (the held-out check): `plan --from OLDER --json` warns that newer runs exist,
    naming the newest; its text says so too; `--from` the newest warns of nothing."""
    first, _, newest = three_runs(workspace, cli)
    planned = cli.json("plan", "counter", "--from", first)
    assert planned["start"] == "from" and planned["source"] == first
    forks = [w for w in planned["warnings"] if "newer runs exist" in w]
    assert len(forks) == 1, planned["warnings"]
    assert newest in forks[0] and "forks the thread" in forks[0], forks
    assert planned["fork"] == {"newest": newest, "newer": 2}
    text = cli("plan", "counter", "--from", first, check=0).stdout
    assert "newer runs exist" in text and newest in text, text
    at_newest = cli.json("plan", "counter", "--from", newest)
    assert at_newest["fork"] is None
    assert not [w for w in at_newest["warnings"] if "newer runs" in w], at_newest


def test_run_from_an_older_run_warns_on_stderr_in_json_and_in_its_record(
    workspace: Path, cli: CLI
) -> None:
    """Item 3: `run --from OLDER` says it forks (stderr, `warnings`, a `warning` event);
    the fork is then what a plain run picks up — which is what the warning said."""
    first, _, newest = three_runs(workspace, cli)
    done = cli("run", "counter", "--from", first, "--json", check=0)
    out = orjson.loads(done.stdout)
    assert any("newer runs exist" in w and newest in w for w in out["warnings"]), out
    assert "newer runs exist" in done.stderr and newest in done.stderr, done.stderr
    recorded = [e for e in events(workspace, out["run"]) if e["event"] == "warning"]
    assert any("newer runs exist" in e["message"] for e in recorded), recorded
    plain = cli.json("run", "counter")
    assert plain["picked_up_from"] == out["run"]
    detached = cli.json("run", "counter", "--from", first, "--detach")
    assert any("newer runs exist" in w for w in detached["warnings"]), detached


def test_a_pick_up_from_an_unknown_or_foreign_run_still_refuses_as_before(
    workspace: Path, cli: CLI
) -> None:
    """Bad input: the fork check never turns a refusal into a warning."""
    three_runs(workspace, cli)
    unknown = cli("plan", "counter", "--from", "20200101T000000.000Z-abcdef", "--json")
    assert unknown.returncode == 2
    assert orjson.loads(unknown.stdout)["refusal"]["code"] == "NOT_FOUND"
    malformed = cli("plan", "counter", "--from", "../x", "--json")
    assert malformed.returncode == 2


TICKING = """
    import time
    from flowdrop_tui import flow

    @flow(resumable=True, description="ticks")
    def main(run):
        for n in run.rounds():
            run.state["n"] = n
            time.sleep(0.1)
"""


def test_a_thread_run_by_path_is_listed_by_flows_as_its_own_row(workspace: Path, cli: CLI) -> None:
    """Item 1 (the held-out check): `run flows/tick` (and `flows/tick/`, as shell
    completion gives it) is the thread keyed by the path; `flows` lists it as a row of its
    own — text and --json — while the name's row keeps its own thread."""
    write_flow(workspace, "counter", COUNTER)
    by_name = cli.json("run", "counter")
    by_path = cli.json("run", "flows/counter/")
    assert by_path["flow"] == "flows/counter"
    rows = {row["name"]: row for row in cli.json("flows")}
    assert set(rows) == {"counter", "flows/counter"}, rows
    assert rows["flows/counter"]["by_path"] is True and rows["counter"]["by_path"] is False
    assert rows["flows/counter"]["last_run"] == by_path["run"]
    assert rows["counter"]["last_run"] == by_name["run"]
    assert rows["flows/counter"]["round"] == 2 and rows["flows/counter"]["resumable"] is True
    text = cli("flows", check=0).stdout
    line = next(ln for ln in text.splitlines() if ln.startswith("flows/counter "))
    assert by_path["run"] in line and "run by path" in line, text
    again = cli.json("run", "flows/counter")  # the path's thread goes on from its own run
    assert again["picked_up_from"] == by_path["run"] and again["first_round"] == 3


def test_a_live_thread_run_by_path_shows_running_and_stops(workspace: Path, cli: CLI) -> None:
    """Item 1: while it runs its row says running; `stop` of its run ends it."""
    write_flow(workspace, "tick", TICKING)
    run_id = cli.json("run", "flows/tick", "--detach")["run"]
    rows = {row["name"]: row for row in cli.json("flows")}
    assert rows["flows/tick"]["status"] == "running" and rows["flows/tick"]["last_run"] == run_id
    assert rows["tick"]["last_run"] is None
    cli("stop", run_id, "--wait", check=0)
    assert {row["name"]: row for row in cli.json("flows")}["flows/tick"]["status"] == "cancelled"


def test_run_by_path_says_it_is_another_thread_naming_the_names_command(
    workspace: Path, cli: CLI
) -> None:
    """Item 1: `run` by path warns on stderr and in `warnings` (foreground, detached, and
    `plan`) that it is not the name's thread, naming `flowdrop-tui run NAME`; by name, or
    by the path of a flow that has no name (outside flows/), it does not."""
    write_flow(workspace, "counter", COUNTER)
    done = cli("run", "flows/counter/", "--json", check=0)
    out = orjson.loads(done.stdout)
    said = [w for w in out["warnings"] if "run by its path" in w]
    assert len(said) == 1 and "flowdrop-tui run counter" in said[0], out["warnings"]
    assert "run by its path" in done.stderr and "flowdrop-tui run counter" in done.stderr
    detached = cli.json("run", "flows/counter/flow.py", "--detach")
    assert any("flowdrop-tui run counter" in w for w in detached["warnings"]), detached
    planned = cli.json("plan", "flows/counter")
    assert any("run by its path" in w for w in planned["warnings"]), planned
    by_name = cli("run", "counter", "--json", check=0)
    assert "run by its path" not in by_name.stderr
    assert not orjson.loads(by_name.stdout)["warnings"]
    elsewhere = workspace / "tools" / "sweep"
    elsewhere.mkdir(parents=True)
    (elsewhere / "flow.py").write_text((workspace / "flows/counter/flow.py").read_text())
    outside = cli("run", "tools/sweep", "--json", check=0)
    assert "run by its path" not in outside.stderr, outside.stderr
    assert "tools/sweep" in {row["name"] for row in cli.json("flows")}


def test_a_path_thread_whose_folder_is_gone_or_a_forged_key_lists_nothing_and_no_crash(
    workspace: Path, cli: CLI
) -> None:
    """Bad input: a path key whose folder was deleted is not listed (as a deleted named
    flow is not); a forged key leading out of the workspace in the index is ignored."""
    write_flow(workspace, "counter", COUNTER)
    gone = write_flow(workspace, "gone", COUNTER)
    cli.json("run", "flows/gone")
    (gone / "flow.py").unlink()
    gone.rmdir()
    index_path = workspace / ".flowdrop" / "index.json"
    data = orjson.loads(index_path.read_bytes())
    forged = dict(next(iter(data["keys"].values())))
    data["keys"]["../../etc"] = forged
    data["keys"]["/abs/flow"] = forged
    index_path.write_bytes(orjson.dumps(data))
    listed = cli("flows", "--json")
    assert listed.returncode == 0, listed.stderr
    assert {row["name"] for row in orjson.loads(listed.stdout)} == {"counter"}
    assert cli("flows").returncode == 0
