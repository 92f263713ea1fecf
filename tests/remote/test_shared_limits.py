"""Usage-limit windows shared by every worker of a space (SPEC §19, remote mode).

Each run on a worker has a worktree (and so a ``.flowdrop/limits.json``) of its own;
the window is the space's, a row in PostgreSQL held against the other workers. Two
workspaces here stand for two workers' worktrees, each with the run child's mirror."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from flowdrop_tui.core.paths import Layout
from flowdrop_tui.core.records import mirror
from flowdrop_tui.core.records.spend import limit_windows
from flowdrop_tui.core.remote.daemon.write_through import RemoteMirror, RunTicket

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def worktree(tmp_path: Path, name: str) -> Layout:
    folder = tmp_path / name
    folder.mkdir()
    layout = Layout(folder)
    layout.ensure()
    return layout


@pytest.fixture
def said() -> list[str]:
    return []


@pytest.fixture
def shared(postgres_url: str, space: str, said: list[str]) -> Iterator[RemoteMirror]:
    ticket = RunTicket(postgres_url, space, "agent", 1, "w1")
    found = RemoteMirror(ticket, say=said.append, die=lambda: None)
    mirror.install(found)
    try:
        yield found
    finally:
        mirror.install(None)
        found.close()


def test_a_window_one_worker_meets_closes_for_every_worker(
    tmp_path: Path, shared: RemoteMirror
) -> None:
    """Guards a limit met on one worker: a run on another worker (another worktree)
    waits on the same window without calling, and a success there opens it for all."""
    one, other = worktree(tmp_path, "one"), worktree(tmp_path, "other")
    until = NOW + timedelta(minutes=5)
    limit_windows.close(
        one, "claude", until=until, source="result", run="r1", probe_base=60, now=NOW
    )
    seen = limit_windows.current(other, "claude", now=NOW + timedelta(minutes=1))
    assert seen is not None and seen.until == until and seen.run == "r1"
    assert limit_windows.take_probe(other, "claude", probe_base=60, now=NOW) is not None
    assert limit_windows.clear(other, "claude", before=NOW + timedelta(minutes=6))
    assert limit_windows.current(one, "claude", now=NOW + timedelta(minutes=1)) is None


def test_only_one_worker_takes_a_probe(tmp_path: Path, shared: RemoteMirror) -> None:
    """Guards "only one session probes a window with no reset time" across workers:
    the first to ask at the probe time calls, the other waits on the moved probe."""
    one, other = worktree(tmp_path, "one"), worktree(tmp_path, "other")
    window = limit_windows.close(
        one, "codex", until=None, source="message", run="r1", probe_base=60, now=NOW
    )
    assert window.next_probe == NOW + timedelta(seconds=60)
    at = NOW + timedelta(seconds=61)
    assert limit_windows.take_probe(one, "codex", probe_base=60, now=at) is None
    waits = limit_windows.take_probe(other, "codex", probe_base=60, now=at)
    assert waits is not None and waits.next_probe is not None and waits.next_probe > at


def test_an_unreachable_store_leaves_the_run_its_own_window(
    tmp_path: Path, space: str, said: list[str]
) -> None:
    """Guards "nothing about keeping it may stop a run": PostgreSQL out of reach, the
    window is kept in the run's own file, with one warning, and no error."""
    ticket = RunTicket("postgresql://nobody@127.0.0.1:1/none", space, "agent", 1, "w1")
    found = RemoteMirror(ticket, say=said.append, die=lambda: None)
    mirror.install(found)
    try:
        one = worktree(tmp_path, "one")
        until = NOW + timedelta(minutes=5)
        limit_windows.close(
            one, "claude", until=until, source="result", run="r1", probe_base=60, now=NOW
        )
        assert limit_windows.current(one, "claude", now=NOW) is not None
        assert limit_windows.clear(one, "claude", before=NOW + timedelta(minutes=6))
    finally:
        mirror.install(None)
        found.close()
    assert len(said) == 1 and "limits.json not shared" in said[0], said
