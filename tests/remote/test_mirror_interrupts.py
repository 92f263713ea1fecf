"""A Ctrl-C (stop now) that lands between an event's local append and its write
through to PostgreSQL: the line still reaches PostgreSQL before the interrupt is
raised. Before, the KeyboardInterrupt left the line on this disk only — a gap in
PostgreSQL's ``cycle.jsonl``, and readers stop at a gap, so every later line (the
``stop_requested``, the ``ended``) was lost to them too.

The signal is real (``signal.raise_signal``) and the handler is the run's own
(``RunSignals``); a profile hook sends it the moment the local ``os.write`` returns,
which a loaded machine hits once in a few runs of ``test_mirror``'s Ctrl-C test."""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from flowdrop_tui.core.records import mirror
from flowdrop_tui.core.records.log.event_log import EventLog
from flowdrop_tui.core.remote.daemon.write_through import RemoteMirror, RunTicket
from flowdrop_tui.core.remote.postgres.store import PostgresStore
from flowdrop_tui.core.run.signals import RunSignals

RUN = "20261206T070000.000Z-c0ffee"


def _no_death() -> None:
    raise AssertionError("the mirror gave up")


@pytest.fixture
def mirrored_log(pg_store: PostgresStore, tmp_path: Path) -> Iterator[tuple[EventLog, Path]]:
    epoch = pg_store.claim("k", worker="w")
    run_dir = tmp_path / ".flowdrop" / "runs" / RUN
    run_dir.mkdir(parents=True)
    (run_dir / "cycle.jsonl").write_bytes(b"")
    remote = RemoteMirror(RunTicket(pg_store.url, pg_store.space, "k", epoch, "w"), die=_no_death)
    remote.published(run_dir)
    mirror.install(remote)
    log = EventLog(run_dir / "cycle.jsonl")
    try:
        yield log, run_dir
    finally:
        mirror.install(None)
        log.close()
        remote.close()


def interrupt_after_the_local_write() -> None:
    """SIGINT to this process the moment the next ``os.write`` returns."""
    fired = False

    def hook(_frame: Any, event: str, arg: Any) -> None:
        nonlocal fired
        if event == "c_return" and arg is os.write and not fired:
            fired = True
            sys.setprofile(None)
            signal.raise_signal(signal.SIGINT)

    sys.setprofile(hook)


@pytest.mark.parametrize("event", ["tick", "round_started"])
def test_a_stop_now_right_after_a_local_append_still_writes_it_through(
    mirrored_log: tuple[EventLog, Path], pg_store: PostgresStore, event: str
) -> None:
    log, run_dir = mirrored_log
    signals = RunSignals(run_dir, log, lambda _: None, lambda: 1, set())
    signals.install()
    try:
        signals.note_stop(False, {"via": "Ctrl-C"})  # the first Ctrl-C: this one is "stop now"
        with pytest.raises(KeyboardInterrupt):
            interrupt_after_the_local_write()
            try:
                log.append(event, i=1)
            finally:
                sys.setprofile(None)
        log.append("ended", status="cancelled")
    finally:
        signals.ended()  # (its watchdog would kill this process)
        signals.uninstall()
    local = (run_dir / "cycle.jsonl").read_bytes()
    assert [line.split(b'"event":"')[1].split(b'"')[0] for line in local.splitlines()] == [
        b"stop_requested",
        event.encode(),
        b"stop_requested",
        b"ended",
    ]
    assert pg_store.read_file(RUN, "cycle.jsonl") == local
