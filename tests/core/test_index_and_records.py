"""SPEC §4 and §8: tolerant records, exact liveness, and an index that is exact or rebuilt."""

from __future__ import annotations

import concurrent.futures
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest

from flowdrop_tui.core.paths import Layout
from flowdrop_tui.core.records.listing import index
from flowdrop_tui.core.records.log.event_lines import parse_lines
from tests.conftest import CLI, events, wait_for, write_flow
from tests.flow_bodies import adds_one_a_round

FLOW = adds_one_a_round("n", rounds=2)


def index_file(ws: Path) -> Path:
    return ws / ".flowdrop" / "index.json"


def rebuilt_equals_current(ws: Path) -> None:
    current = orjson.loads(index_file(ws).read_bytes())
    fresh = index._scan(Layout(ws))
    assert current == fresh


def test_index_tracks_last_run_source_status_and_round(workspace: Path, cli: CLI) -> None:
    write_flow(workspace, "f", FLOW)
    a = cli.json("run", "f")
    b = cli.json("run", "f")
    entry = orjson.loads(index_file(workspace).read_bytes())["keys"]["f"]
    assert entry == {
        "last_run": b["run"],
        "source": b["run"],
        "status": "completed",
        "round": 4,
        "flow": "flows/f",
    }
    assert a["run"] != b["run"]
    rebuilt_equals_current(workspace)


@pytest.mark.parametrize(
    "garbage",
    [
        b"",
        b"{not json",
        b"[]",
        b'{"v": 99, "keys": {}}',
        b'{"v": 1, "keys": {"f": 3}}',
        b"\x00\xff\xfe",
    ],
)
def test_unusable_index_is_rebuilt_and_pick_up_is_unaffected(
    workspace: Path, cli: CLI, garbage: bytes
) -> None:
    write_flow(workspace, "f", FLOW)
    a = cli.json("run", "f")
    index_file(workspace).write_bytes(garbage)
    b = cli.json("run", "f")
    assert b["picked_up_from"] == a["run"] and b["first_round"] == 3
    rebuilt_equals_current(workspace)


def test_index_pointing_at_a_deleted_run_is_rebuilt(workspace: Path, cli: CLI) -> None:
    write_flow(workspace, "f", FLOW)
    a = cli.json("run", "f")
    b = cli.json("run", "f")
    shutil.rmtree(workspace / ".flowdrop" / "runs" / b["run"])
    c = cli.json("run", "f")
    assert c["picked_up_from"] == a["run"] and c["first_round"] == 3
    rows = cli.json("flows")
    assert rows[0]["last_run"] == c["run"]
    rebuilt_equals_current(workspace)


def test_reindex_rebuilds_from_records(workspace: Path, cli: CLI) -> None:
    write_flow(workspace, "f", FLOW)
    cli.json("run", "f")
    before = orjson.loads(index_file(workspace).read_bytes())
    index_file(workspace).unlink()
    out = cli.json("reindex")
    assert out == {"runs": 1, "keys": 1}
    assert orjson.loads(index_file(workspace).read_bytes()) == before


def test_runs_of_many_flows_ending_at_once_leave_the_index_exact(workspace: Path, cli: CLI) -> None:
    """Guards the read-modify-write under the lock: no lost update."""
    names = [f"f{i:02d}" for i in range(12)]
    for name in names:
        write_flow(workspace, name, FLOW)
    cli.json("flows")
    with concurrent.futures.ThreadPoolExecutor(12) as pool:
        results = list(pool.map(lambda n: cli("run", n, "--json"), names))
    assert all(r.returncode == 0 for r in results), [r.stderr for r in results]
    keys = orjson.loads(index_file(workspace).read_bytes())["keys"]
    assert sorted(keys) == names
    assert all(entry["status"] == "completed" and entry["round"] == 2 for entry in keys.values())
    rebuilt_equals_current(workspace)


def test_torn_last_line_and_junk_are_skipped_by_readers(workspace: Path, cli: CLI) -> None:
    write_flow(workspace, "f", FLOW)
    a = cli.json("run", "f")
    cycle = workspace / ".flowdrop" / "runs" / a["run"] / "cycle.jsonl"
    whole = cycle.read_bytes()
    cycle.write_bytes(whole[: len(whole) - 7])  # tear the last line ("ended")
    shown = cli.json("show", a["run"])
    assert shown["status"] == "interrupted"  # the ended line is gone: live record, no process
    cycle.write_bytes(b'garbage\n\x00\xff\n[1,2]\n{"no_event": 1}\n' + whole + b'{"t":')
    assert cli.json("show", a["run"])["status"] == "completed"
    assert parse_lines(b'\n\n{"event": "x"}\n{broken') == [{"event": "x"}]


@pytest.mark.parametrize("content", [None, b"", b"\x00\x01\x02binary"])
def test_run_folder_without_a_readable_record_is_shown_not_crashed(
    workspace: Path, cli: CLI, content: bytes | None
) -> None:
    write_flow(workspace, "f", FLOW)
    good = cli.json("run", "f")
    broken = workspace / ".flowdrop" / "runs" / "20200101T000000.000Z-abcdef"
    broken.mkdir()
    if content is not None:
        (broken / "cycle.jsonl").write_bytes(content)
    rows = cli.json("runs")
    assert {r["run"] for r in rows} == {good["run"], broken.name}
    assert cli.json("show", broken.name)["flow"] is None
    assert cli.json("flows")[0]["last_run"] == good["run"]
    again = cli.json("run", "f")
    assert again["picked_up_from"] == good["run"]


def test_liveness_is_not_fooled_by_a_reused_pid(workspace: Path, cli: CLI) -> None:
    """A record naming a live but unrelated pid is still interrupted: only the lock counts."""
    write_flow(
        workspace,
        "f",
        """
        import time
        from flowdrop_tui import flow

        @flow(stall=None)  # changes nothing on purpose: never paused as stalled
        def main(run):
            for r in run.rounds():
                time.sleep(0.1)
    """,
    )
    proc = cli.start("run", "f")
    runs = workspace / ".flowdrop" / "runs"
    run_id = wait_for(lambda: [p.name for p in runs.glob("2*")] if runs.exists() else [])[0]
    wait_for(lambda: any(e["event"] == "round_started" for e in events(workspace, run_id)))
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    cycle = runs / run_id / "cycle.jsonl"
    lines = cycle.read_bytes().splitlines()
    forged = [orjson.loads(line) for line in lines]
    for event in forged:
        if "pid" in event:
            event["pid"] = os.getpid()  # a live process: this test runner
    cycle.write_bytes(b"\n".join(orjson.dumps(e) for e in forged) + b"\n")
    assert cli.json("show", run_id)["status"] == "interrupted"


def test_a_child_process_of_a_killed_run_does_not_keep_it_alive(workspace: Path, cli: CLI) -> None:
    """Guards the lock choice: an orphaned grandchild must not hold the run's liveness."""
    write_flow(
        workspace,
        "spawner",
        """
        import os, subprocess, sys, time
        from flowdrop_tui import flow

        @flow(stall=None)  # its loop changes nothing: never paused as stalled
        def main(run):
            child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
            run.state["child"] = child.pid
            if os.fork() == 0:  # a forked copy of the run process itself
                time.sleep(60)
                os._exit(0)
            for r in run.rounds():
                time.sleep(0.1)
    """,
    )
    run_id = cli.json("run", "spawner", "--detach")["run"]
    wait_for(lambda: any(e["event"] == "round_started" for e in events(workspace, run_id)))
    pid = cli.json("show", run_id)["pid"]
    child = orjson.loads((workspace / ".flowdrop" / "runs" / run_id / "state.json").read_bytes())
    os.kill(pid, signal.SIGKILL)
    try:
        wait_for(lambda: cli.json("show", run_id)["status"] == "interrupted", timeout=10)
    finally:
        subprocess.run(["pkill", "-KILL", "-g", str(pid)], check=False)
        try:
            os.kill(child["spawner"]["child"], signal.SIGKILL)
        except ProcessLookupError:
            pass


def test_flows_json_in_a_loop_never_errors_while_runs_start_and_end(
    workspace: Path, cli: CLI
) -> None:
    for i in range(4):
        write_flow(workspace, f"f{i}", FLOW)
    cli.json("flows")
    stop = time.monotonic() + 4
    viewer = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import subprocess, sys, time\n"
            "end = time.monotonic() + 4\nbad = 0\n"
            "while time.monotonic() < end:\n"
            "    r = subprocess.run([sys.executable, '-m', 'flowdrop_tui', 'flows', '--json'],"
            " capture_output=True)\n"
            "    bad += r.returncode != 0\n"
            "print(bad)\n",
        ],
        cwd=workspace,
        stdout=subprocess.PIPE,
        text=True,
    )
    while time.monotonic() < stop:
        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            list(pool.map(lambda i: cli("run", f"f{i}"), range(4)))
    out, _ = viewer.communicate(timeout=60)
    assert out.strip() == "0"
    rebuilt_equals_current(workspace)


def test_a_resume_after_a_half_done_close_starts_with_no_request_pending(tmp_path: Path) -> None:
    """Found by bench/kill9.py: `stop` of a paused run killed between its stop_requested
    and its `ended` left a stop "pending" in the fold after a later resume, so a pause
    of the resumed, live run was refused. The resumed process has no such request."""
    from flowdrop_tui.core.records.run_record.run_fold import fold

    evs = [
        {"t": "1", "event": "created", "key": "k", "first_round": 1},
        {"t": "2", "event": "started"},
        {"t": "3", "event": "paused", "position": {}},
        {"t": "4", "event": "stop_requested", "by": {}, "now": False},
        {"t": "5", "event": "resumed", "by": {}},
    ]
    info = fold("20200101T000000.000Z-abcdef", tmp_path, evs)
    assert info.recorded == "running"
    assert not (info.stop_pending or info.stop_now or info.pause_pending)
