"""The record folder (issue 6): what comes from a file is checked before it becomes a path,
no link is written through, a torn line swallows nothing, and viewers never import flows."""

from __future__ import annotations

import errno
import os
import subprocess
from pathlib import Path
from typing import Any

import orjson
import pytest

from flowdrop_tui.core import locks, records
from flowdrop_tui.core.records import EventLog, parse_lines
from flowdrop_tui.core.state import write_atomic
from tests.conftest import CLI, events, wait_for, write_flow

SESSIONS_FLOW = """
    import sys, time
    from flowdrop_tui import flow

    @flow(resumable=True)
    def main(run):
        for r in run.rounds(range(4)):
            run.session("command", [sys.executable, "-c", f"print('round {r}')"])
            run.state["done"] = r
            time.sleep(0.2)
        return "finished"
"""


def paused(ws: Path, cli: CLI, name: str = "s", body: str = SESSIONS_FLOW) -> str:
    write_flow(ws, name, body)
    run_id = str(cli.json("run", name, "--detach")["run"])
    wait_for(lambda: any(e["event"] == "round_ended" for e in events(ws, run_id)))
    cli("pause", run_id, "--wait", check=0)
    assert cli.json("show", run_id)["status"] == "paused"
    return run_id


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

    monkeypatch.setattr(records.os, "write", half)
    log.append("torn")
    monkeypatch.setattr(records.os, "write", real_write)
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
