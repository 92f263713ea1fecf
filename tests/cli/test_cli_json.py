"""The command line's gaps found by trying it as a new user would (docs/decisions.md,
"Listing"):
every command takes ``--json``, a name that exists nowhere is exit 2 everywhere, a
stop reports the status it left, and a warning reaches ``--json`` output too."""

from __future__ import annotations

import shutil
from pathlib import Path

import orjson

from tests.conftest import CLI, events, paused_mid_run, wait_for, write_flow

ITEMS = """
    from flowdrop_tui import flow

    @flow(resumable=True)
    def main(run):
        for item in run.rounds(["a", "b"]):
            run.state["last"] = item
"""

BATCH = """
    import os, time
    from flowdrop_tui import flow

    @flow()
    def main(run):
        for item in run.rounds(["a", "b", "c"]):
            while os.path.exists("hold"):
                time.sleep(0.02)
            run.state["last"] = item
"""

UNKNOWN = "20990101T000000.000Z-abcdef"


def test_snapshot_takes_json_like_every_command(workspace: Path, cli: CLI) -> None:
    """``snapshot RUN --json`` was refused as an unknown argument."""
    write_flow(workspace, "items", ITEMS)
    run_id = cli.json("run", "items")["run"]
    plain = cli("snapshot", run_id, check=0)
    done = cli("snapshot", run_id, "--json", check=0)
    assert orjson.loads(done.stdout) == orjson.loads(plain.stdout)
    assert orjson.loads(done.stdout)["runId"] == run_id


def test_snapshot_of_no_such_run_is_a_json_error_with_json(workspace: Path, cli: CLI) -> None:
    done = cli("snapshot", UNKNOWN, "--json", check=2)
    error = orjson.loads(done.stdout)["error"]
    assert error["code"] == "NOT_FOUND" and UNKNOWN in error["message"]


def test_runs_of_a_name_that_exists_nowhere_is_exit_2_naming_it(workspace: Path, cli: CLI) -> None:
    """``runs NOSUCH`` printed ``[]`` and exited 0, where ``run NOSUCH`` exits 2."""
    write_flow(workspace, "items", ITEMS)
    done = cli("runs", "nosuch", check=2)
    assert "nosuch" in done.stderr and "items" in done.stderr  # says which flows there are
    assert done.stdout == "" and "Traceback" not in done.stderr
    error = cli.json("runs", "nosuch", check=2)["error"]
    assert error["code"] == "NOT_FOUND" and "'nosuch'" in error["message"]
    assert cli("run", "nosuch").returncode == 2  # the same answer as run gives


def test_runs_of_a_flow_with_no_runs_yet_is_an_empty_list(workspace: Path, cli: CLI) -> None:
    write_flow(workspace, "items", ITEMS)
    assert cli.json("runs", "items") == []
    assert cli("runs", "items", check=0).stdout.strip() == "no runs yet of items"


def test_runs_of_a_flow_whose_folder_is_gone_are_still_listed(workspace: Path, cli: CLI) -> None:
    write_flow(workspace, "items", ITEMS)
    run_id = cli.json("run", "items")["run"]
    shutil.rmtree(workspace / "flows" / "items")
    assert [row["run"] for row in cli.json("runs", "items")] == [run_id]


def test_runs_of_an_invalid_name_is_refused_as_invalid(workspace: Path, cli: CLI) -> None:
    error = cli.json("runs", "../x", check=2)["error"]
    assert error["code"] == "INVALID_NAME"


def test_stop_of_a_paused_run_reports_cancelled_not_null(workspace: Path, cli: CLI) -> None:
    run_id = paused_mid_run(workspace, cli, "batch", BATCH)
    answer = cli.json("stop", run_id)
    assert answer["status"] == "cancelled"
    assert "closed cancelled" in answer["message"]
    assert cli.json("show", run_id)["status"] == "cancelled"


def test_stop_without_wait_reports_the_status_it_left(workspace: Path, cli: CLI) -> None:
    """A live run asked to stop is still running when the command returns: it says so."""
    write_flow(workspace, "batch", BATCH)
    (workspace / "hold").write_text("")
    run_id = cli.json("run", "batch", "--detach")["run"]
    wait_for(lambda: any(e["event"] == "round_started" for e in events(workspace, run_id)))
    answer = cli.json("stop", run_id)  # the round in flight holds until "hold" is gone
    assert answer["status"] == "running"
    assert "will stop after round 1" in answer["message"]
    (workspace / "hold").unlink()
    wait_for(lambda: cli.json("show", run_id)["status"] == "cancelled")


def test_a_warning_is_in_run_json_as_well_as_on_stderr(workspace: Path, cli: CLI) -> None:
    """An unknown --resume id starts fresh with a warning: it was on stderr only."""
    write_flow(workspace, "items", ITEMS)
    done = cli("run", "items", "--resume", UNKNOWN, "--json", check=0)
    answer = orjson.loads(done.stdout)
    expected = f"checkpoint {UNKNOWN} resolves to no run; starting fresh"
    assert answer["warnings"] == [expected]
    assert answer["status"] == "completed" and answer["start"] == "fresh"
    assert f"warning: {expected}" in done.stderr.splitlines()
    clean = cli.json("run", "items", "--fresh")
    assert clean["warnings"] == []


def test_a_detached_run_warns_once_in_json_stderr_and_output_log(workspace: Path, cli: CLI) -> None:
    """The detached path printed ``warning: warning: …`` and left it out of ``--json``."""
    write_flow(workspace, "items", ITEMS)
    done = cli("run", "items", "--resume", UNKNOWN, "--detach", "--json", check=0)
    answer = orjson.loads(done.stdout)
    expected = f"checkpoint {UNKNOWN} resolves to no run; starting fresh"
    assert answer["warnings"] == [expected]
    assert done.stderr.splitlines() == [f"warning: {expected}"]
    plain = cli("run", "items", "--resume", UNKNOWN, "--detach", check=0)
    # once: now naming the run it looks past (the first), SPEC §7.2
    [line] = plain.stderr.splitlines()
    assert line.startswith(f"warning: {expected}. This looks past run {answer['run']}")
    log = workspace / ".flowdrop" / "runs" / answer["run"] / "output.log"
    wait_for(lambda: f"warning: {expected}" in log.read_text())
    assert log.read_text().count(expected) == 1
