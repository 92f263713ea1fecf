"""Hostile flows and records that used to wedge or crash the engine (docs/decisions.md,
"Hostile folders, records and processes"; items 10–15, 17 and 18 of that work's list):
each case through the real command, with real files and processes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import orjson
import pytest

from tests.conftest import CLI, events, wait_for, write_flow

ONE_ROUND = """
    from flowdrop_tui import flow

    @flow(resumable=True)
    def main(run):
        for r in run.rounds(range(1)):
            run.state["n"] = 1
        return "ok"
"""


def nested(depth: int) -> str:
    """A JSON list nested ``depth`` levels deep."""
    return "[" * depth + "]" * depth


def only_run(ws: Path) -> str:
    runs = sorted(p.name for p in (ws / ".flowdrop" / "runs").iterdir() if p.name[0] != ".")
    assert runs, "no run was made"
    return runs[-1]


# -- item 13: a state nested deeper than the writer's limit -------------------------------------


def test_a_state_nested_hundreds_of_levels_is_refused_naming_the_file(
    workspace: Path, cli: CLI
) -> None:
    """Guards against tracebacks (exit 1) from `run`, `snapshot` and `show` when a
    run's state.json nests 255–490 levels deep: orjson reads it, then cannot write it."""
    write_flow(workspace, "deep", ONE_ROUND)
    cli("run", "deep", check=0)
    run_id = only_run(workspace)
    state = workspace / ".flowdrop" / "runs" / run_id / "state.json"
    for depth in (300, 490):
        state.write_text('{"deep": {"x": ' + nested(depth) + "}}")
        before = state.read_bytes()
        for args in (("run", "deep"), ("snapshot", run_id)):
            done = cli(*args, check=3)
            assert "Traceback" not in done.stderr
            assert str(state) in done.stderr and "levels deep" in done.stderr
        shown = cli.json("show", run_id)  # show still shows the run, saying why not its state
        assert shown["state"] is None and str(state) in shown["state_error"]
        assert "Traceback" not in cli("show", run_id, check=0).stderr
        assert state.read_bytes() == before  # left as it is
    assert len(list((workspace / ".flowdrop" / "runs").iterdir())) == 1  # no run was made


def test_a_snapshot_nested_hundreds_of_levels_is_refused_naming_the_file(
    workspace: Path, cli: CLI, tmp_path: Path
) -> None:
    """Guards against `run --snapshot` crashing with a traceback on a deep snapshot."""
    write_flow(workspace, "deep", ONE_ROUND)
    snap = tmp_path / "deep.json"
    for depth in (260, 480):
        snap.write_text('{"status": null, "data": {"x": ' + nested(depth) + "}}")
        done = cli("run", "deep", "--snapshot", str(snap), check=3)
        assert "Traceback" not in done.stderr and str(snap) in done.stderr
    assert not (workspace / ".flowdrop" / "runs").exists() or not list(
        (workspace / ".flowdrop" / "runs").iterdir()
    )


def test_a_forged_record_nested_past_the_writer_limit_is_still_shown(
    workspace: Path, cli: CLI
) -> None:
    """Guards against `show --json` crashing on a result nested deeper than orjson writes."""
    write_flow(workspace, "deep", ONE_ROUND)
    cli("run", "deep", check=0)
    run_id = only_run(workspace)
    cycle = workspace / ".flowdrop" / "runs" / run_id / "cycle.jsonl"
    lines = cycle.read_bytes().splitlines()
    ended = orjson.loads(lines[-1])
    assert ended["event"] == "ended"
    raw = orjson.dumps(ended).decode().replace('"result":"ok"', '"result":' + nested(600))
    cycle.write_bytes(b"\n".join(lines[:-1]) + b"\n" + raw.encode() + b"\n")
    shown = cli.json("show", run_id)
    assert shown["status"] == "completed" and isinstance(shown["result"], list)


# -- item 12: a detached run that prints a lot before it answers --------------------------------


def test_detach_returns_when_the_run_prints_more_than_a_pipe_holds_before_answering(
    workspace: Path, cli: CLI
) -> None:
    """Guards against `run --detach` deadlocking (120 s, then "exit status -9") when
    the run's process printed 64 KiB or more (a chatty import) before its handshake."""
    write_flow(
        workspace,
        "chatty",
        """
        import sys
        from flowdrop_tui import flow

        sys.stdout.write("x" * 300_000 + "\\n")
        sys.stdout.flush()
        sys.stderr.write("y" * 100_000 + "\\n")

        @flow()
        def main(run):
            return "done"
        """,
    )
    done = cli("run", "chatty", "--detach", "--json", timeout=60, check=0)
    run_id = orjson.loads(done.stdout)["run"]
    wait_for(lambda: any(e["event"] == "ended" for e in events(workspace, run_id)))
    assert [e["outcome"] for e in events(workspace, run_id) if e["event"] == "ended"] == [
        "completed"
    ]


# -- item 10: what a flow folder holds besides code ---------------------------------------------


def _limit_memory() -> None:
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (600 << 20, 600 << 20))


@pytest.mark.parametrize("planted", ["fifo", "link-to-dev-zero", "huge-data-file", "link-out"])
def test_a_flow_folder_holding_no_ordinary_file_never_hangs_or_fills_memory(
    workspace: Path, cli: CLI, tmp_path: Path, planted: str
) -> None:
    """Guards against `flows` and `run` hanging forever on a FIFO in a flow folder,
    growing without bound reading a link to /dev/zero, and reading a big data file
    whole on every listing (here a 1 GiB one under a 600 MiB memory limit)."""
    folder = write_flow(workspace, "hostile", ONE_ROUND)
    write_flow(workspace, "plain", ONE_ROUND)
    if planted == "fifo":
        os.mkfifo(folder / "pipe")
    elif planted == "link-to-dev-zero":
        (folder / "zero").symlink_to("/dev/zero")
    elif planted == "huge-data-file":
        with open(folder / "data.bin", "wb") as handle:
            handle.truncate(1 << 30)  # sparse: costs no disk
    else:
        outside = tmp_path / "outside.txt"
        outside.write_text("v1")
        (folder / "notes.txt").symlink_to(outside)
    for _ in range(2):  # cold, then from the cache
        listed = subprocess.run(
            [sys.executable, "-m", "flowdrop_tui", "flows", "--json"],
            cwd=workspace,
            capture_output=True,
            text=True,
            timeout=60,
            preexec_fn=_limit_memory,
        )
        assert listed.returncode == 0, listed.stderr
        rows = {row["name"]: row for row in orjson.loads(listed.stdout)}
        assert rows["hostile"]["resumable"] is True and rows["hostile"]["error"] is None
        assert rows["plain"]["resumable"] is True
    cli("run", "hostile", timeout=60, check=0)
    if planted == "link-out":  # a link is never followed out of the folder: its text counts
        from flowdrop_tui.core.flows.discovery import DescribeCache
        from flowdrop_tui.core.paths import Layout

        before = DescribeCache(Layout(workspace)).entries["flows/hostile"]["hash"]
        (tmp_path / "outside.txt").write_text("v2, somewhere else")
        cli("flows", timeout=60, check=0)
        assert DescribeCache(Layout(workspace)).entries["flows/hostile"]["hash"] == before
    if planted == "huge-data-file":  # a change to the data is still a change
        with open(folder / "data.bin", "r+b") as handle:
            handle.truncate((1 << 30) + 1)
        from flowdrop_tui.core.flows.discovery import DescribeCache, discover
        from flowdrop_tui.core.paths import Layout

        layout = Layout(workspace)
        before = DescribeCache(layout).entries["flows/hostile"]["hash"]
        cli("flows", timeout=60, check=0)
        assert DescribeCache(layout).entries["flows/hostile"]["hash"] != before
        assert [ref.name for ref in discover(layout)] == ["hostile", "plain"]


# -- item 18: names, hints and first imports ---------------------------------------------------


@pytest.mark.parametrize("name", ["ä" * 45, "日本" * 40, "ü" * 127, "é" * 20 + "x" * 200])
def test_a_long_non_ascii_flow_name_that_is_listed_also_runs(
    workspace: Path, cli: CLI, name: str
) -> None:
    """Guards against a non-ASCII flow name over ~41 characters being listed but
    refused by `run` ("File name too long": its key lock's file name, percent-encoded,
    passed 255 bytes), and names listed that `run` calls invalid."""
    write_flow(workspace, name, ONE_ROUND)
    listed = [row["name"] for row in cli.json("flows")]
    assert listed == [name]
    cli("run", name, check=0)
    again = cli("run", name, check=0)  # picked up: the same key, the same lock
    assert "picked up from" in again.stderr
    assert cli.json("flows")[0]["round"] == 2


def test_the_pick_up_hint_of_a_run_whose_record_names_no_flow_never_says_none(
    workspace: Path, cli: CLI
) -> None:
    """Guards against `stop`/`pause`/`resume` of an ended run whose record lost its
    creation suggesting `flowdrop-tui run None --from RUN`."""
    write_flow(workspace, "p", ONE_ROUND)
    cli("run", "p", check=0)
    run_id = only_run(workspace)
    (workspace / ".flowdrop" / "runs" / run_id / "cycle.jsonl").write_bytes(b"\x00junk\n")
    for verb in ("stop", "pause", "resume"):
        done = cli(verb, run_id, check=3)
        assert "None" not in done.stderr, done.stderr
        assert f"run FLOW --from {run_id}" in done.stderr and "cycle.jsonl" in done.stderr


SLOW_ONCE = """
    import pathlib, time
    from flowdrop_tui import flow

    mark = pathlib.Path(__file__).parents[2] / "imported-once"
    if not mark.exists():  # a cold first import: over the 5 s limit, once
        mark.write_text("")
        time.sleep(8)

    @flow(resumable=True)
    def main(run):
        return "ran"
"""


def test_a_flow_slow_only_on_its_first_import_is_asked_again(workspace: Path, cli: CLI) -> None:
    """Guards against a flow whose first import took over 5 s being cached as "did not
    answer" (listed so, and `run` refused) until its file changed."""
    write_flow(workspace, "slow", SLOW_ONCE)
    assert "did not answer" in cli.json("flows")[0]["error"]
    cli("run", "slow", check=0)  # `run` asks the flow again
    assert cli.json("flows")[0]["error"] is None
    # a listing asks again too, once the timeout is old enough
    (workspace / "imported-once").unlink()
    with open(workspace / "flows" / "slow" / "flow.py", "a") as handle:
        handle.write("# changed\n")
    assert "did not answer" in cli.json("flows")[0]["error"]
    cache = workspace / ".flowdrop" / "cache" / "flows.json"
    data = orjson.loads(cache.read_bytes())
    data["entries"]["flows/slow"]["t"] -= 3600
    cache.write_bytes(orjson.dumps(data))
    assert cli.json("flows")[0]["error"] is None


# -- item 17: links planted inside .flowdrop/ ---------------------------------------------------

SESSION_FLOW = """
    from flowdrop_tui import flow

    @flow(resumable=True)
    def main(run):
        for r in run.rounds(range(1)):
            run.session("command", ["echo", "hi"])
        return "ok"
"""


@pytest.mark.parametrize("planted", [".gitignore", "index.lock", "keys", "cache", "transcripts"])
def test_a_link_planted_inside_the_records_folder_is_never_written_through(
    workspace: Path, cli: CLI, tmp_path: Path, planted: str
) -> None:
    """Guards against links at `.flowdrop/.gitignore`, `index.lock`, `keys/`, `cache/`
    and `transcripts/` making the engine write files outside `.flowdrop/`."""
    write_flow(workspace, "s", SESSION_FLOW)
    root = workspace / ".flowdrop"
    root.mkdir()
    outside = tmp_path / "outside"
    if planted in (".gitignore", "index.lock"):
        (root / planted).symlink_to(outside)  # dangling: writing through it creates it
    else:
        outside.mkdir()
        (root / planted).symlink_to(outside, target_is_directory=True)
    listed = cli("flows", "--json", check=0)  # listing still works
    assert orjson.loads(listed.stdout)[0]["resumable"] is True
    done = cli("run", "s")
    # A refusal up front is clean; a session refused mid-run fails the flow as any
    # exception the flow does not catch does (its traceback goes to output.log).
    assert done.returncode == 1 or "Traceback" not in done.stderr
    if planted == "cache":  # a cache: not kept, and the run goes on
        assert done.returncode == 0, done.stderr
    else:  # refused up front (3), or the session refused mid-run (1), naming the link
        assert done.returncode in (1, 3), done.stderr
        assert f"{root / planted} is a link" in done.stderr + _output_logs(root)
    if planted in (".gitignore", "index.lock"):
        assert not outside.exists()
    else:
        assert list(outside.iterdir()) == []


def _output_logs(root: Path) -> str:
    """What the runs in ``root`` recorded as their errors (a session refused mid-run)."""
    found = []
    for cycle in root.glob("runs/*/cycle.jsonl"):
        found.append(cycle.read_text(errors="replace"))
    return "".join(found)


LOOPING = """
    import time
    from flowdrop_tui import flow

    @flow(stall=None)  # it changes nothing, on purpose: never paused as stalled (SPEC §20)
    def main(run):
        for r in run.rounds():
            time.sleep(0.05)
"""


def test_a_link_planted_at_a_live_runs_requests_folder_is_refused(
    workspace: Path, cli: CLI, tmp_path: Path
) -> None:
    """Guards against `stop`/`pause` writing their request through a link left in
    place of a live run's `requests/` folder (and the run deleting files through it)."""
    write_flow(workspace, "loop", LOOPING)
    run_id = cli.json("run", "loop", "--detach")["run"]
    wait_for(lambda: any(e["event"] == "round_started" for e in events(workspace, run_id)))
    requests = workspace / ".flowdrop" / "runs" / run_id / "requests"
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "pause.json").write_text("{}")  # the run must not consume (delete) it
    requests.rmdir()
    requests.symlink_to(outside, target_is_directory=True)
    for verb in ("stop", "pause"):
        done = cli(verb, run_id, check=3)
        assert f"{requests} is a link" in done.stderr
    time.sleep(0.5)  # rounds go on meanwhile: the run looks at its inbox between rounds
    assert sorted(p.name for p in outside.iterdir()) == ["pause.json"]
    assert cli.json("show", run_id)["status"] == "running"


# -- item 15: one huge record of a dead run -----------------------------------------------------


def _grow_record(cycle: Path, key: str, rounds: int) -> int:
    """Append ``rounds`` rounds to a record as a fast loop would; the last round's number."""
    lines = [orjson.loads(line) for line in cycle.read_bytes().splitlines() if line.strip()]
    last = max((e["round"] for e in lines if e["event"] == "round_started"), default=0)
    out = bytearray()
    for n in range(last + 1, last + 1 + rounds):
        t = "2026-01-01T00:00:00.000Z"
        out += orjson.dumps({"t": t, "event": "round_started", "key": key, "round": n}) + b"\n"
        out += (
            orjson.dumps({"t": t, "event": "round_ended", "key": key, "round": n, "outcome": "ok"})
            + b"\n"
        )
    with open(cycle, "ab") as handle:
        handle.write(out)
    return last + rounds


def _listing(ws: Path, *args: str) -> Any:
    done = subprocess.run(
        [sys.executable, "-m", "flowdrop_tui", *args, "--json"],
        cwd=ws,
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=_limit_memory_tight,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return orjson.loads(done.stdout)


def _limit_memory_tight() -> None:
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (320 << 20, 320 << 20))


def test_a_huge_record_of_a_dead_run_is_folded_once_in_bounded_memory(
    workspace: Path, cli: CLI
) -> None:
    """Guards against every `flows`/`runs` re-reading a dead run's huge record whole
    (a 183 MB one: 4–5 s and 1.35 GB each) to repair its index entry, never written."""
    write_flow(workspace, "fast", LOOPING)
    run_id = cli.json("run", "fast", "--detach")["run"]
    wait_for(lambda: any(e["event"] == "round_started" for e in events(workspace, run_id)))
    from tests.conftest import kill_live_runs

    assert kill_live_runs(workspace) == [run_id]  # killed -9: its entry is left behind
    wait_for(lambda: cli.json("show", run_id)["status"] == "interrupted")
    cycle = workspace / ".flowdrop" / "runs" / run_id / "cycle.jsonl"
    last = _grow_record(cycle, "fast", 400_000)  # about 50 MB
    assert cycle.stat().st_size > 40 << 20
    for _ in range(2):
        rows = _listing(workspace, "flows")
        assert rows[0]["status"] == "interrupted" and rows[0]["round"] == last
        runs = _listing(workspace, "runs")
        assert runs[0]["status"] == "interrupted" and runs[0]["last_round"] == last
    # the repair was written once: the index itself now says what the record says
    entry = orjson.loads((workspace / ".flowdrop" / "index.json").read_bytes())["keys"]["fast"]
    assert entry["round"] == last and entry["status"] == "running"
    # and later reads fold only what was appended since
    more = _grow_record(cycle, "fast", 3)
    assert _listing(workspace, "runs")[0]["last_round"] == more
    assert _listing(workspace, "flows")[0]["round"] == more


# -- item 11: a stopped process holding the index lock ------------------------------------------

HOLD_LOCK = """
import fcntl, os, sys, time
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o644)
fcntl.flock(fd, fcntl.LOCK_EX)
print("held", flush=True)
time.sleep(600)
"""


def test_a_stopped_process_holding_the_index_lock_never_blocks_a_run(
    workspace: Path, cli: CLI
) -> None:
    """Guards against a Ctrl-Z'd `reindex` (here: a stopped process holding
    index.lock) blocking every run start and end silently: runs carry on without the
    index after a deadline, naming the holder, and the index is exact once it is free."""
    write_flow(workspace, "p", ONE_ROUND.replace("range(1)", "range(2)"))
    cli("run", "p", check=0)
    lock = workspace / ".flowdrop" / "index.lock"
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_LOCK, str(lock)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        os.kill(holder.pid, signal.SIGSTOP)  # as Ctrl-Z would
        done = cli("run", "p", timeout=45, check=0)
        assert f"process {holder.pid}" in done.stderr and str(lock) in done.stderr
        assert "picked up from" in done.stderr  # the pick-up was still right
        rows = orjson.loads(cli("flows", "--json", timeout=45, check=0).stdout)
        assert rows[0]["round"] == 4 and rows[0]["status"] == "completed"
        refused = cli("reindex", timeout=45, check=3)
        assert f"process {holder.pid}" in refused.stderr
    finally:
        holder.kill()
        holder.wait()
    third = cli("run", "p", timeout=45, check=0)
    assert f"process {holder.pid}" not in third.stderr
    runs = sorted(p.name for p in (workspace / ".flowdrop" / "runs").iterdir())
    entry = orjson.loads((workspace / ".flowdrop" / "index.json").read_bytes())["keys"]["p"]
    assert entry["last_run"] == entry["source"] == runs[-1]
    assert entry["round"] == 6 and entry["status"] == "completed"
    assert not (workspace / ".flowdrop" / "index.stale").exists()


# -- item 14: big results and snapshots, and the lines they make --------------------------------

BIG_RESULT = """
    from flowdrop_tui import flow

    @flow(resumable=True)
    def main(run):
        for r in run.rounds(range(1)):
            run.state["n"] = 1
            run.log("big", blob="b" * 1_500_000)
        return {"rows": ["x" * 100 for _ in range(20_000)]}
"""


def _follow(ws: Path, run_id: str) -> Any:
    from flowdrop_tui.core.paths import Layout
    from flowdrop_tui.core.records.run_record.follow import RunFollower

    return RunFollower(Layout(ws), run_id).poll(history=True)


def test_a_big_result_is_kept_whole_and_the_run_is_seen_completed(
    workspace: Path, cli: CLI
) -> None:
    """Guards against the UI dropping an event line over 1 MiB: a run returning a big
    result was shown `interrupted` (its `ended` line was skipped)."""
    write_flow(workspace, "big", BIG_RESULT)
    done = cli("run", "big", "--json", check=0)
    run_id = orjson.loads(done.stdout)["run"]
    followed = _follow(workspace, run_id)
    assert followed.info.status == "completed"
    assert any(e["event"] == "ended" for e in followed.events)
    cycle = workspace / ".flowdrop" / "runs" / run_id / "cycle.jsonl"
    assert max(len(line) for line in cycle.read_bytes().splitlines()) <= 64 * 1024
    shown = cli.json("show", run_id)
    assert shown["status"] == "completed" and len(shown["result"]["rows"]) == 20_000
    assert orjson.loads(done.stdout)["result"] == shown["result"]


def test_a_run_from_a_big_snapshot_is_followed_and_carries_it_on(
    workspace: Path, cli: CLI, tmp_path: Path
) -> None:
    """Guards against a run started from a big snapshot showing `None`, "fresh start"
    in the UI (its `created` line, over 1 MiB, was skipped)."""
    write_flow(workspace, "big", ONE_ROUND)
    snap = tmp_path / "snap.json"
    messages = [{"role": "user", "content": "m" * 1000} for _ in range(2000)]
    snap.write_bytes(
        orjson.dumps({"status": None, "data": {"n": 0}, "metadata": {}, "messages": messages})
    )
    run_id = orjson.loads(cli("run", "big", "--snapshot", str(snap), "--json").stdout)["run"]
    cycle = workspace / ".flowdrop" / "runs" / run_id / "cycle.jsonl"
    assert max(len(line) for line in cycle.read_bytes().splitlines()) <= 64 * 1024
    followed = _follow(workspace, run_id)
    assert followed.info.start == "snapshot" and followed.info.key == "big"
    assert followed.info.status == "completed"
    exported = orjson.loads(cli("snapshot", run_id, check=0).stdout)
    assert exported["messages"] == messages
    cli("run", "big", check=0)  # picked up: the messages go on along the thread
    runs = sorted(p.name for p in (workspace / ".flowdrop" / "runs").iterdir())
    assert orjson.loads(cli("snapshot", runs[-1], check=0).stdout)["messages"] == messages


def test_a_record_with_a_line_longer_than_a_read_chunk_is_followed_whole(
    workspace: Path, cli: CLI
) -> None:
    """Guards the reading side on its own: a record written before events were bounded
    (an `ended` line of 3 MiB) is read whole by the UI's follower."""
    write_flow(workspace, "p", ONE_ROUND)
    cli("run", "p", check=0)
    run_id = only_run(workspace)
    cycle = workspace / ".flowdrop" / "runs" / run_id / "cycle.jsonl"
    lines = cycle.read_bytes().splitlines()
    ended = orjson.loads(lines[-1])
    ended["result"] = "r" * (3 << 20)
    cycle.write_bytes(b"\n".join(lines[:-1]) + b"\n" + orjson.dumps(ended) + b"\n")
    followed = _follow(workspace, run_id)
    assert followed.info.status == "completed" and followed.info.result == "r" * (3 << 20)
