"""Bad input through the real command: a clear message, the right exit code, nothing
overwritten (issue 6). The cases already covered elsewhere are listed, with their
tests, in docs/reliability.md; this file holds the rest."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from flowdrop_tui import ensure_resumable, seed_next_turn
from flowdrop_tui.core import index
from flowdrop_tui.core.paths import Layout
from tests.conftest import CLI, events, wait_for, write_flow

COUNTER = """
    from flowdrop_tui import flow

    @flow(resumable=True)
    def main(run):
        for r in run.rounds(range(2)):
            run.state["count"] = run.state.get("count", 0) + 1
        return run.state["count"]
"""


def run_ids(ws: Path) -> list[str]:
    runs = ws / ".flowdrop" / "runs"
    return sorted(p.name for p in runs.iterdir() if p.name[0] != ".") if runs.exists() else []


def error_of(done: object) -> dict[str, str]:
    stdout = getattr(done, "stdout", "")
    stderr = getattr(done, "stderr", "")
    assert "Traceback" not in stderr, stderr
    return dict(orjson.loads(stdout)["error"])


def index_agrees_with_records(ws: Path) -> None:
    layout = Layout(ws)
    assert orjson.loads(layout.index.read_bytes()) == index._scan(layout)


# -- snapshots ------------------------------------------------------------------------------


@pytest.mark.parametrize("status", [b"[]", b'["completed"]', b'{"s": 1}', b"3", b"true"])
def test_snapshot_whose_status_is_not_a_string_is_refused_naming_the_file(
    workspace: Path, cli: CLI, tmp_path: Path, status: bytes
) -> None:
    """Guards a traceback found by fuzzing: a list status did not hash for the status check."""
    write_flow(workspace, "counter", COUNTER)
    path = tmp_path / "snap.json"
    content = b'{"status": ' + status + b', "data": {}}'
    path.write_bytes(content)
    done = cli("run", "counter", "--snapshot", str(path), "--json")
    assert done.returncode == 3
    error = error_of(done)
    assert error["code"] == "UNUSABLE_STATE" and str(path) in error["message"]
    assert "status" in error["message"]
    assert path.read_bytes() == content and run_ids(workspace) == []


def test_snapshot_that_is_a_folder_is_exit_2(workspace: Path, cli: CLI, tmp_path: Path) -> None:
    write_flow(workspace, "counter", COUNTER)
    done = cli("run", "counter", "--snapshot", str(tmp_path), "--json")
    assert done.returncode == 2 and "folder" in error_of(done)["message"]


def test_public_snapshot_rules_take_a_status_of_any_type() -> None:
    """``seed_next_turn``/``ensure_resumable`` are public: another store's dict must not crash
    them. A status that is not a string is no outcome: nothing is cleared or refused."""
    odd = {"status": ["completed"], "data": {"k": 1}, "iterationCount": 3}
    assert seed_next_turn(odd) == odd and seed_next_turn(odd) is not odd
    ensure_resumable(odd, "snap")  # not terminal: no refusal


# -- the index --------------------------------------------------------------------------------


def test_index_naming_a_path_as_a_run_is_rebuilt_not_followed(workspace: Path, cli: CLI) -> None:
    """Guards the record folder: a forged index naming ``../../x`` (where a record-looking
    file waits) made ``run`` fail with exit 2; it is now unusable, so it is rebuilt."""
    write_flow(workspace, "counter", COUNTER)
    first = cli.json("run", "counter")
    outside = workspace / "x"
    outside.mkdir()
    (outside / "cycle.jsonl").write_bytes(
        (workspace / ".flowdrop" / "runs" / first["run"] / "cycle.jsonl").read_bytes()
    )
    layout = Layout(workspace)
    forged = orjson.loads(layout.index.read_bytes())
    forged["keys"]["counter"].update(last_run="../../x", source="../../x", status="running")
    layout.index.write_bytes(orjson.dumps(forged))
    second = cli.json("run", "counter")
    assert second["picked_up_from"] == first["run"] and second["first_round"] == 3
    index_agrees_with_records(workspace)


@pytest.mark.parametrize("round_", ["abc", [1], -1, True, None])
def test_index_with_a_round_that_is_not_a_count_is_rebuilt(
    workspace: Path, cli: CLI, round_: object
) -> None:
    """Guards a crash found by fuzzing: ``flows --json`` did ``int("abc")`` on a forged round."""
    write_flow(workspace, "counter", COUNTER)
    first = cli.json("run", "counter")
    layout = Layout(workspace)
    forged = orjson.loads(layout.index.read_bytes())
    forged["keys"]["counter"]["round"] = round_
    layout.index.write_bytes(orjson.dumps(forged))
    rows = cli.json("flows")
    assert rows[0]["round"] == 2 and rows[0]["last_run"] == first["run"]
    index_agrees_with_records(workspace)


# -- records ---------------------------------------------------------------------------------


@pytest.mark.parametrize("content", [b"garbage\n", b"", b"\x00\xff\xfe binary", None])
def test_latest_run_with_an_unreadable_record_is_looked_past_with_a_warning(
    workspace: Path, cli: CLI, content: bytes | None
) -> None:
    """Guards the round counter: through a stale index, a run whose cycle.jsonl was damaged
    was picked up from as if it were a fresh chain (round 1). It is looked past, as
    ``reindex`` and docs/decisions.md say, and the new run says so."""
    write_flow(workspace, "counter", COUNTER)
    first = cli.json("run", "counter")
    damaged = cli.json("run", "counter")["run"]
    cycle = workspace / ".flowdrop" / "runs" / damaged / "cycle.jsonl"
    if content is None:
        cycle.unlink()
    else:
        cycle.write_bytes(content)
    state_before = (cycle.parent / "state.json").read_bytes()
    done = cli("run", "counter", "--json")
    assert done.returncode == 0, done.stderr
    third = orjson.loads(done.stdout)
    assert third["picked_up_from"] == first["run"] and third["first_round"] == 3
    if content is not None:  # a missing cycle.jsonl is a run that is gone: rebuilt silently
        assert f"run {damaged} has no readable record" in done.stderr
        warned = [e for e in events(workspace, third["run"]) if e["event"] == "warning"]
        assert warned and damaged in warned[0]["message"]
    assert (cycle.parent / "state.json").read_bytes() == state_before  # nothing overwritten
    index_agrees_with_records(workspace)


# -- flows that changed under a paused run ----------------------------------------------------

PAUSABLE = """
    import time
    from flowdrop_tui import flow

    @flow(resumable=True)
    def main(run):
        for r in run.rounds(range(6)):
            run.state["done"] = r
            time.sleep(0.15)
        return "finished"
"""


def paused_run(ws: Path, cli: CLI, name: str = "p") -> str:
    write_flow(ws, name, PAUSABLE)
    run_id = str(cli.json("run", name, "--detach")["run"])
    wait_for(lambda: any(e["event"] == "round_started" for e in events(ws, run_id)))
    cli("pause", run_id, "--wait", check=0)
    assert cli.json("show", run_id)["status"] == "paused"
    return run_id


def test_resume_of_a_run_whose_flow_now_hangs_at_import_is_refused(
    workspace: Path, cli: CLI
) -> None:
    """Guards resume: it loaded the flow in its own process with no limit and hung with
    the run held. It is now checked in a child first (5 s), as ``run`` checks it."""
    run_id = paused_run(workspace, cli)
    (workspace / "flows" / "p" / "flow.py").write_text("import time\ntime.sleep(120)\n")
    before = events(workspace, run_id)
    for command in (["resume", run_id], ["resume", run_id, "--detach"], ["run", "p"]):
        done = cli(*command, "--json", timeout=60)
        assert done.returncode == 1, (command, done.stdout, done.stderr)
        assert "did not answer in 5 s" in error_of(done)["message"]
    assert events(workspace, run_id) == before  # the paused run is untouched
    assert cli.json("show", run_id)["status"] == "paused"


@pytest.mark.parametrize("forged", ["flows/other", "../outside"])
def test_resume_loads_the_flow_its_key_names_not_a_path_from_the_record(
    workspace: Path, cli: CLI, forged: str
) -> None:
    """Guards the record folder: a forged ``flow`` field in a paused run's ``created`` event
    made resume import code from elsewhere (or fail with exit 2)."""
    marker = workspace.parent / "imported"
    evil = f"open({str(marker)!r}, 'w').write('x')\nfrom flowdrop_tui import flow\n"
    evil += "@flow(resumable=True)\ndef main(run):\n    return 'evil'\n"
    write_flow(workspace, "other", evil)
    (workspace.parent / "outside").mkdir()
    (workspace.parent / "outside" / "flow.py").write_text(evil)
    run_id = paused_run(workspace, cli)
    cycle = workspace / ".flowdrop" / "runs" / run_id / "cycle.jsonl"
    evs = [orjson.loads(line) for line in cycle.read_bytes().splitlines()]
    evs[0]["flow"] = forged
    cycle.write_bytes(b"".join(orjson.dumps(e) + b"\n" for e in evs))
    done = cli("resume", run_id, "--json")
    assert done.returncode == 0, done.stderr
    assert orjson.loads(done.stdout)["result"] == "finished"
    assert not marker.exists()
