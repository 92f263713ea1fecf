"""Bad input through the real command: a clear message, the right exit code, nothing
overwritten (docs/decisions.md, "Crash safety and bad input"). The cases already covered
elsewhere are listed, with their tests, in docs/reliability.md; this file holds the rest."""

from __future__ import annotations

import contextlib
import resource
import signal
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from flowdrop_tui import ensure_resumable, seed_next_turn
from flowdrop_tui.core.files import locks
from flowdrop_tui.core.flows.discovery import CACHE_VERSION
from flowdrop_tui.core.paths import Layout
from flowdrop_tui.core.records.listing import index
from tests.conftest import CLI, events, paused_mid_run, wait_for, write_flow
from tests.flow_bodies import adds_one_a_round, counts_rounds

COUNTER = adds_one_a_round("count", rounds=2)


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


# -- state.json ---------------------------------------------------------------------------------

BAD_STATES = {
    "array": (b"[1, 2]", "holds list"),
    "number": (b"7", "holds int"),
    "empty": (b"", "not valid JSON"),
    "key-holds-list": (b'{"counter": [1]}', "under 'counter' is list"),
    "key-holds-text": (b'{"counter": "x"}', "under 'counter' is str"),
    "missing": (None, "is missing"),
    "a-folder": ("folder", "cannot be read"),
}


@pytest.mark.parametrize("case", sorted(BAD_STATES))
def test_unusable_state_of_the_pick_up_source_is_refused_and_left_as_is(
    workspace: Path, cli: CLI, case: str
) -> None:
    """Guards INT-15 for every way a state.json can be unusable: ``run`` refuses naming
    the file (exit 3) and creates nothing; ``show`` still shows the run with the reason;
    ``snapshot`` refuses; the file is left exactly as it was."""
    write_flow(workspace, "counter", COUNTER)
    first = cli.json("run", "counter")["run"]
    path = workspace / ".flowdrop" / "runs" / first / "state.json"
    content, fragment = BAD_STATES[case]
    path.unlink()
    if content == "folder":
        path.mkdir()
    elif isinstance(content, bytes):
        path.write_bytes(content)
    done = cli("run", "counter", "--json")
    assert done.returncode == 3
    error = error_of(done)
    assert error["code"] == "UNUSABLE_STATE" and str(path) in error["message"]
    assert fragment in error["message"]
    assert run_ids(workspace) == [first]
    shown = cli.json("show", first)
    assert shown["state"] is None and fragment in shown["state_error"]
    assert cli("snapshot", first).returncode == 3
    if content == "folder":
        assert path.is_dir()
    elif isinstance(content, bytes):
        assert path.read_bytes() == content
    else:
        assert not path.exists()
    assert cli.json("run", "counter", "--fresh")["status"] == "completed"


def test_resume_of_a_paused_run_with_unusable_state_is_refused_and_stays_paused(
    workspace: Path, cli: CLI
) -> None:
    run_id = paused_run(workspace, cli)
    path = workspace / ".flowdrop" / "runs" / run_id / "state.json"
    path.write_bytes(b"{torn")
    done = cli("resume", run_id, "--json")
    assert done.returncode == 3 and error_of(done)["code"] == "UNUSABLE_STATE"
    assert path.read_bytes() == b"{torn"
    assert cli.json("show", run_id)["status"] == "paused"


# -- the workspace and names -----------------------------------------------------------------


def test_records_folder_that_is_a_file_refuses_runs_and_still_lists(
    workspace: Path, cli: CLI
) -> None:
    write_flow(workspace, "counter", COUNTER)
    (workspace / ".flowdrop").write_text("not a folder")
    for command in (["run", "counter"], ["run", "counter", "--detach"], ["reindex"]):
        done = cli(*command, "--json")
        assert done.returncode == 3, command
        assert error_of(done)["code"] == "RECORDS_UNWRITABLE"
    assert [r["name"] for r in cli.json("flows")] == ["counter"]
    assert cli.json("runs") == []
    assert (workspace / ".flowdrop").read_text() == "not a folder"


@pytest.mark.parametrize("name", [".hidden", "a\nb", "a\tb", "..", "../flows/counter"])
def test_flow_names_that_are_not_a_folder_name_are_exit_2(
    workspace: Path, cli: CLI, name: str
) -> None:
    write_flow(workspace, "counter", COUNTER)
    done = cli("run", name, "--json")
    assert done.returncode == 2
    assert error_of(done)["code"] == "INVALID_NAME"
    assert run_ids(workspace) == []


def test_a_garbage_description_cache_is_described_again(workspace: Path, cli: CLI) -> None:
    write_flow(workspace, "counter", COUNTER)
    cache = workspace / ".flowdrop" / "cache" / "flows.json"
    cache.parent.mkdir(parents=True)
    cache.write_bytes(b"\x00{garbage")
    assert cli.json("flows")[0]["resumable"] is True
    assert orjson.loads(cache.read_bytes())["v"] == CACHE_VERSION


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
    import os, time
    from flowdrop_tui import flow

    @flow(resumable=True)
    def main(run):
        for r in run.rounds(range(6)):
            run.state["done"] = r
            time.sleep(0.05)
            while os.path.exists("hold"):  # the test's gate: pause certainly mid-run
                time.sleep(0.02)
        return "finished"
"""


def paused_run(ws: Path, cli: CLI, name: str = "p") -> str:
    return paused_mid_run(ws, cli, name, PAUSABLE)


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


# -- the records folder becomes unwritable, or the disk fills, while a run runs ---------------

STEADY = counts_rounds("r", sleep=0.05)


def warnings_of(ws: Path, run_id: str) -> list[str]:
    return [str(e["message"]) for e in events(ws, run_id) if e["event"] == "warning"]


def test_state_unwritable_mid_run_carries_on_with_a_warning_and_saves_again(
    workspace: Path, cli: CLI
) -> None:
    """Guards SPEC §5 rule 3 in a real run: a folder (not empty) where state.json goes
    makes every replacement of it fail; a warning is recorded, the run carries on — each
    save kept in its state log, which readers read (issue 28) — and state.json follows
    once it can be replaced again."""
    write_flow(workspace, "steady", STEADY)
    run_id = str(cli.json("run", "steady", "--detach")["run"])
    folder = workspace / ".flowdrop" / "runs" / run_id
    target = folder / "state.json"
    wait_for(lambda: sum(e["event"] == "round_ended" for e in events(workspace, run_id)) >= 2)
    stuck = 0

    def block() -> bool:
        nonlocal stuck
        if target.is_dir():
            return True
        with contextlib.suppress(FileNotFoundError, orjson.JSONDecodeError):
            stuck = orjson.loads(target.read_bytes())["steady"]["r"]
            target.unlink()
        with contextlib.suppress(FileExistsError):
            target.mkdir()
            (target / "in the way").write_text("a rename over a folder that is not empty fails")
        return target.is_dir()

    wait_for(block)
    wait_for(lambda: any("state.json not replaced" in w for w in warnings_of(workspace, run_id)))
    wait_for(lambda: events(workspace, run_id)[-1].get("round", 0) >= stuck + 3)
    assert target.is_dir()
    shown = cli.json("show", run_id)
    assert shown["status"] == "running"
    assert shown["state"]["steady"]["r"] > stuck  # the saves go on, in the log
    (target / "in the way").unlink()
    target.rmdir()
    wait_for(lambda: "state.json replaced again" in " ".join(warnings_of(workspace, run_id)))
    assert orjson.loads(target.read_bytes())["steady"]["r"] > stuck
    cli("stop", run_id, "--wait", check=0)
    shown = cli.json("show", run_id)
    assert shown["status"] == "cancelled"
    assert shown["state"]["steady"]["r"] == shown["last_round"] > stuck
    assert orjson.loads(target.read_bytes())["steady"]["r"] == shown["last_round"]
    assert not [p.name for p in folder.iterdir() if ".next-" in p.name or p.name == "state.log"]


def test_index_unwritable_never_stops_a_run_and_refuses_a_new_one_naming_it(
    workspace: Path, cli: CLI
) -> None:
    """Guards the index as a cache: with index.json unwritable, resuming a paused run
    crashed with a traceback and closed it cancelled. The run now carries on (warning
    recorded, index removed so readers rebuild); a new run is refused up front."""
    run_id = paused_run(workspace, cli)
    blocker = workspace / ".flowdrop" / "index.json.tmp"
    blocker.mkdir()
    done = cli("resume", run_id, "--json")
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    assert orjson.loads(done.stdout)["result"] == "finished"
    assert any("index was not updated" in w for w in warnings_of(workspace, run_id))
    fresh = cli("run", "p", "--fresh", "--json")
    assert fresh.returncode == 3
    error = error_of(fresh)
    assert error["code"] == "RECORDS_UNWRITABLE" and "index.json.tmp" in error["message"]
    rows = cli.json("flows")  # read-only: answered from the records
    assert rows[0]["last_run"] == run_id and rows[0]["status"] == "completed"
    blocker.rmdir()
    assert cli.json("run", "p")["picked_up_from"] == run_id
    index_agrees_with_records(workspace)


FILLS_THE_DISK = """
    from flowdrop_tui import flow

    @flow()
    def main(run):
        run.state["small"] = 1
        run.state["big"] = "x" * 300_000   # the file would pass the size limit: not saved
        run.state["after"] = 2             # still too big: the last save stands
        saved = open(run.workspace / ".flowdrop" / "runs" / run.run_id / "state.json").read()
        del run.state["big"]               # fits again: saved
        return saved
"""


def test_a_full_disk_while_saving_state_keeps_the_last_save_and_the_run_going(
    workspace: Path, tmp_path: Path
) -> None:
    """Guards SPEC §5 rule 3 against a real kernel refusal: the run's process may write no
    file past 200 kB (RLIMIT_FSIZE: writes fail with EFBIG, as ENOSPC would on a full disk)."""
    write_flow(workspace, "fills", FILLS_THE_DISK)
    CLI(workspace).json("flows")  # describe outside the limit

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (200_000, 200_000))
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)

    done = subprocess.run(
        [sys.executable, "-m", "flowdrop_tui", "run", "fills", "--json"],
        cwd=workspace,
        capture_output=True,
        text=True,
        timeout=60,
        preexec_fn=limit,
    )
    assert done.returncode == 0, done.stderr
    out = orjson.loads(done.stdout)
    assert orjson.loads(out["result"]) == {"fills": {"small": 1}}  # the last save stood
    run_id = out["run"]
    state = orjson.loads((workspace / ".flowdrop" / "runs" / run_id / "state.json").read_bytes())
    assert state == {"fills": {"small": 1, "after": 2}}
    messages = warnings_of(workspace, run_id)
    assert any("File too large" in m for m in messages), messages
    assert messages[-1] == "state saved again after earlier failures"


# -- leftovers of kills ------------------------------------------------------------------------


def test_half_made_record_folders_are_swept_when_the_index_is_rebuilt(
    workspace: Path, cli: CLI
) -> None:
    """A kill while a record is being made leaves ``runs/.new-<id>``; never a run (not
    listed), it is removed when the index is next rebuilt — unless its creator is alive."""
    write_flow(workspace, "counter", COUNTER)
    kept = cli.json("run", "counter")["run"]
    runs = workspace / ".flowdrop" / "runs"
    dead = runs / ".new-20200101T000000.000Z-aaaaaa"
    (dead / "sessions").mkdir(parents=True)
    (dead / "state.json").write_bytes(b"{}")
    alive = runs / ".new-20200101T000000.000Z-bbbbbb"
    alive.mkdir()
    locks.acquire(alive / "live.lock", content=str(0))
    try:
        assert [r["run"] for r in cli.json("runs")] == [kept]
        assert cli.json("reindex") == {"runs": 1, "keys": 1}
        assert not dead.exists() and alive.exists()
    finally:
        locks.release(alive / "live.lock")
