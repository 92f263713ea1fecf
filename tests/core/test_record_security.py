"""The record folder (docs/decisions.md, "Crash safety and bad input"): what comes from a
file is checked before it becomes a path, no link is written through, a torn line swallows
nothing, and viewers never import flows."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

from flowdrop_tui.core import git
from flowdrop_tui.core.files import locks
from flowdrop_tui.core.files.atomic import write_atomic
from flowdrop_tui.core.paths import Layout
from flowdrop_tui.core.records.log import event_log
from flowdrop_tui.core.records.log.event_lines import parse_lines
from flowdrop_tui.core.records.log.event_log import EventLog
from tests.conftest import CLI, events, paused_mid_run, wait_for, write_flow

SESSIONS_FLOW = """
    import os, sys, time
    from flowdrop_tui import flow

    @flow(resumable=True)
    def main(run):
        for r in run.rounds(range(4)):
            run.session("command", [sys.executable, "-c", f"print('round {r}')"])
            run.state["done"] = r
            time.sleep(0.05)
            while os.path.exists("hold"):  # the test's gate: pause certainly mid-run
                time.sleep(0.02)
        return "finished"
"""


def paused(ws: Path, cli: CLI, name: str = "s", body: str = SESSIONS_FLOW) -> str:
    return paused_mid_run(ws, cli, name, body)


def record(ws: Path, run_id: str) -> Path:
    return ws / ".flowdrop" / "runs" / run_id


def no_traceback(done: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    assert "Traceback" not in done.stderr, done.stderr
    return dict(orjson.loads(done.stdout)) if done.stdout.strip() else {}


# -- torn lines ---------------------------------------------------------------------------


@pytest.mark.parametrize("command", ["resume", "stop"])
def test_a_torn_last_line_does_not_swallow_the_next_event(
    workspace: Path, cli: CLI, command: str
) -> None:
    """Guards cycle.jsonl: a paused run's record ending in a torn line (a kill or a full disk
    mid-write) had the next append glued onto the torn piece, losing that event."""
    run_id = paused(workspace, cli)
    cycle = record(workspace, run_id) / "cycle.jsonl"
    with open(cycle, "ab") as handle:
        handle.write(b'{"t": "2026-01-01T00:00:00.000Z", "event": "log", "mess')
    done = cli(command, run_id, "--json")
    assert done.returncode == 0, done.stderr
    names = [e["event"] for e in events(workspace, run_id)]
    assert ("resumed" if command == "resume" else "stop_requested") in names
    assert names[-1] == "ended"
    lines = cycle.read_bytes().split(b"\n")
    assert lines[-1] == b"" and sum(len(parse_lines(line)) == 0 for line in lines[:-1]) == 1


def test_a_short_write_leaves_the_next_event_on_its_own_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Guards the append side: a full disk can write part of a line; the next line must
    not be glued onto it."""
    log = EventLog(tmp_path / "cycle.jsonl")
    log.append("first")
    real_write = os.write

    def half(fd: int, data: bytes) -> int:
        return real_write(fd, data[: len(data) // 2])

    monkeypatch.setattr(event_log.os, "write", half)
    log.append("torn")
    monkeypatch.setattr(event_log.os, "write", real_write)
    log.append("third")
    log.close()
    assert [e["event"] for e in parse_lines((tmp_path / "cycle.jsonl").read_bytes())] == [
        "first",
        "third",
    ]


# -- links ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "entry", ["cycle.jsonl", "state.json", "output.log", "live.lock", "sessions", "requests"]
)
@pytest.mark.parametrize("command", ["resume", "stop"])
def test_a_link_in_a_paused_record_is_refused_never_written_through(
    workspace: Path, cli: CLI, tmp_path: Path, entry: str, command: str
) -> None:
    """Guards the record folder: resuming or closing a paused run writes its folder again;
    a link left there (to a file, or a folder, outside .flowdrop/) is refused, exit 3."""
    run_id = paused(workspace, cli)
    folder = record(workspace, run_id)
    target = tmp_path / "outside"
    real = folder / entry
    if real.is_dir():
        target.mkdir()
        real.rename(tmp_path / "moved")
    else:
        target.write_bytes(real.read_bytes())
        real.unlink()
    before = sorted(p.name for p in target.iterdir()) if target.is_dir() else target.read_bytes()
    real.symlink_to(target)
    done = cli(command, run_id, "--json")
    assert done.returncode == 3, (done.stdout, done.stderr)
    error = no_traceback(done)["error"]
    assert error["code"] == "RECORDS_UNWRITABLE" and entry in error["message"]
    after = sorted(p.name for p in target.iterdir()) if target.is_dir() else target.read_bytes()
    assert after == before


def test_write_atomic_never_writes_through_a_link_at_its_temporary_name(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.write_bytes(b"keep me")
    target = tmp_path / "state.json"
    (tmp_path / "state.json.tmp").symlink_to(outside)
    write_atomic(target, b'{"k": {}}')
    assert outside.read_bytes() == b"keep me"
    assert target.read_bytes() == b'{"k": {}}' and not target.is_symlink()


def test_sessions_never_write_through_entries_left_in_sessions_or_transcripts(
    workspace: Path, cli: CLI, tmp_path: Path
) -> None:
    """Guards 'symlinks in sessions/ are never followed for writing': names already taken
    (by links to files outside) are skipped; every transcript is a new file of its own."""
    run_id = paused(workspace, cli)
    folder = record(workspace, run_id)
    taken = len(os.listdir(folder / "sessions"))
    victims = [tmp_path / "a", tmp_path / "b"]
    for victim in victims:
        victim.write_bytes(b"untouched")
    transcripts = workspace / ".flowdrop" / "transcripts"
    (folder / "sessions" / f"{taken + 1:03d}-command.log").symlink_to(victims[0])
    (transcripts / f"{run_id}-{taken + 2:03d}.log").symlink_to(victims[1])
    done = cli("resume", run_id, "--json")
    assert done.returncode == 0, done.stderr
    assert all(v.read_bytes() == b"untouched" for v in victims)
    shown = cli.json("show", run_id)
    opened = [s for s in shown["sessions"] if s["closed"]]
    assert len(opened) == 4 and all(s["exists"] and s["exit_code"] == 0 for s in opened)
    for session in opened:
        transcript = Path(session["target"])
        assert not transcript.is_symlink() and transcript.read_text().startswith("round ")


def test_session_links_read_from_a_record_are_looked_at_only_inside_sessions(
    workspace: Path, cli: CLI, tmp_path: Path
) -> None:
    """Guards ``show``: a forged ``link`` (``../../x``) is not followed out of the record."""
    run_id = paused(workspace, cli)
    secret = tmp_path / "secret-link"
    secret.symlink_to("/where/the/secret/points")
    cycle = record(workspace, run_id) / "cycle.jsonl"
    evs = [orjson.loads(line) for line in cycle.read_bytes().splitlines()]
    for ev in evs:
        if ev["event"] == "session_opened":
            ev["link"] = os.path.relpath(secret, record(workspace, run_id))
    cycle.write_bytes(b"".join(orjson.dumps(e) + b"\n" for e in evs))
    shown = cli.json("show", run_id)
    assert shown["sessions"] and all(
        s["target"] != "/where/the/secret/points" for s in shown["sessions"]
    )


# -- ids, keys and revisions read from files --------------------------------------------


def test_a_forged_key_in_a_paused_record_never_becomes_a_path(workspace: Path, cli: CLI) -> None:
    run_id = paused(workspace, cli)
    cycle = record(workspace, run_id) / "cycle.jsonl"
    evs = [orjson.loads(line) for line in cycle.read_bytes().splitlines()]
    evs[0]["key"] = "../../escaped"
    cycle.write_bytes(b"".join(orjson.dumps(e) + b"\n" for e in evs))
    done = cli("resume", run_id, "--json")
    assert done.returncode == 2 and no_traceback(done)["error"]["code"] == "INVALID_NAME"
    assert not (workspace / ".flowdrop" / "escaped.lock").exists()
    assert not (workspace / "escaped.lock").exists() and not (workspace.parent / "escaped").exists()
    assert cli.json("show", run_id)["status"] == "paused"


def test_a_key_lock_holder_is_named_only_when_it_is_a_run_id(workspace: Path, cli: CLI) -> None:
    """Guards the refusal message: the holder's id is read from a file and was stat'ed as
    ``runs/<holder>`` whatever it said."""
    write_flow(workspace, "s", SESSIONS_FLOW)
    layout = Layout(workspace)
    layout.ensure()
    lock = layout.key_lock("s")
    locks.acquire(lock, content="../../../etc")
    try:
        done = cli("run", "s", "--json")
    finally:
        locks.release(lock)
    assert done.returncode == 3
    message = no_traceback(done)["error"]["message"]
    assert "another run" in message and "etc" not in message


def test_git_is_only_given_commit_ids_read_from_a_record(workspace: Path) -> None:
    """Guards ``show``'s commit list: a revision read from a record (``--all``, an option)
    is not passed to git."""
    head = git.head(workspace)
    assert head is not None
    assert git.commits_between(workspace, None, head)  # a real id still answers
    assert git.commits_between(workspace, None, "--all") == []
    assert git.commits_between(workspace, "--output=/tmp/x", head) == []
    assert git.commits_between(workspace, "HEAD", head) == []


def test_links_are_refused_before_the_lock_is_opened(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A held lock's file is written (the holder's id): never through a link."""
    outside = tmp_path / "outside"
    outside.write_bytes(b"keep me")
    (tmp_path / "k.lock").symlink_to(outside)
    with pytest.raises(OSError) as caught:
        locks.acquire(tmp_path / "k.lock", content="x")
    assert caught.value.errno == errno.ELOOP and outside.read_bytes() == b"keep me"


# -- viewers never import flow code -----------------------------------------------------------


def test_listing_and_launching_never_import_flow_code_in_the_viewer(
    workspace: Path, cli: CLI
) -> None:
    """Guards the listing/UI process: a flow's import side effects happen only in children
    (the describing child, the run's own process), never in the process that asked."""
    marker = workspace.parent / "imported-by"
    write_flow(
        workspace,
        "spy",
        f"""
        import os, time
        from flowdrop_tui import flow
        with open({str(marker)!r}, "a") as f:
            f.write(str(os.getpid()) + "\\n")

        @flow(resumable=True)
        def main(run):
            for r in run.rounds(range(3)):
                run.state["r"] = r
                time.sleep(0.1)
    """,
    )
    askers: list[int] = []

    def ask(*args: str) -> str:
        proc = subprocess.Popen(
            [sys.executable, "-m", "flowdrop_tui", *args],
            cwd=workspace,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
        askers.append(proc.pid)
        return out

    ask("flows", "--json")
    run_id = orjson.loads(ask("run", "spy", "--detach", "--json"))["run"]
    wait_for(lambda: cli.json("show", run_id)["status"] == "completed")
    for command in (["runs", "--json"], ["show", run_id, "--json"], ["snapshot", run_id]):
        ask(*command)
    ask("flows", "--json")
    importers = {int(pid) for pid in marker.read_text().split()}
    run_pid = events(workspace, run_id)[0]["pid"]
    assert run_pid in importers  # the run's own process loads it
    assert importers.isdisjoint(askers)
