"""Pins in remote mode: a row in PostgreSQL that reaches every machine's replica, and
the lock that keeps a pin and a remote prune from passing each other."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from flowdrop_tui.core.errors import InvalidNameError, NotFoundError
from flowdrop_tui.core.paths import Layout
from flowdrop_tui.core.remote import shared_pins
from flowdrop_tui.core.remote.config import RemoteConfig
from flowdrop_tui.core.remote.postgres.store import PostgresStore

RUN_A = "20261130T100000.000Z-aaaaaa"
RUN_B = "20261130T100100.000Z-bbbbbb"


def machine(tmp_path: Path, name: str) -> Layout:
    """A workspace standing for one machine, its replica holding RUN_A and RUN_B."""
    layout = Layout(tmp_path / name)
    layout.workspace.mkdir()
    layout.ensure()
    for run_id in (RUN_A, RUN_B):
        (layout.runs / run_id).mkdir()
    return layout


def stored_run(store: PostgresStore, run_id: str) -> None:
    """A run as a worker's child publishes it, then ended (not live)."""
    epoch = store.claim("counter", worker="w1")
    store.publish("counter", epoch, run_id, {"cycle.jsonl": b'{"event":"created"}\n'})
    store.clear_live("counter", epoch, run_id)


@pytest.fixture
def config(postgres_url: str, space: str, pg_store: PostgresStore) -> RemoteConfig:
    stored_run(pg_store, RUN_A)
    stored_run(pg_store, RUN_B)
    return RemoteConfig(temporal="127.0.0.1:1", postgres=postgres_url, space=space)


def pin_files(layout: Layout) -> list[str]:
    return sorted(p.name for p in layout.pins.iterdir()) if layout.pins.is_dir() else []


def pinned_rows(config: RemoteConfig) -> set[str]:
    with shared_pins.connection(config) as conn:
        return shared_pins.pinned_in(conn, config.space)


def test_a_pin_reaches_every_replica(tmp_path: Path, config: RemoteConfig) -> None:
    """Guards pins across machines: pinned on one, the other's replica has it after its
    sync (so its prune keeps the run), and an unpin is carried over the same way."""
    here, there = machine(tmp_path, "here"), machine(tmp_path, "there")
    assert shared_pins.pin(here, config, RUN_A) is True
    assert shared_pins.pin(here, config, RUN_A) is False  # already pinned: said, not an error
    assert pinned_rows(config) == {RUN_A}
    assert (here.pins / RUN_A).exists()
    assert not (there.pins / RUN_A).exists()
    shared_pins.sync_pins(there, config)
    assert pin_files(there) == [RUN_A]
    assert shared_pins.unpin(there, config, RUN_A) is True
    assert shared_pins.unpin(there, config, RUN_A) is False
    shared_pins.sync_pins(here, config)
    assert pin_files(here) == []
    assert pinned_rows(config) == set()


def test_pins_of_other_spaces_stay_apart(
    tmp_path: Path, config: RemoteConfig, postgres_url: str
) -> None:
    """Guards several repositories sharing one database: a space sees only its pins."""
    other = RemoteConfig(temporal="127.0.0.1:1", postgres=postgres_url, space=config.space + "x")
    here = machine(tmp_path, "here")
    shared_pins.pin(here, config, RUN_A)
    elsewhere = machine(tmp_path, "elsewhere")
    shared_pins.sync_pins(elsewhere, other)
    assert pin_files(elsewhere) == []


def test_pinning_an_unknown_run_is_refused(tmp_path: Path, config: RemoteConfig) -> None:
    """Guards bad input: a run nowhere and a folder here that PostgreSQL does not hold (a
    local leftover) are NOT_FOUND, a path is INVALID_NAME, and nothing is pinned."""
    here = machine(tmp_path, "here")
    leftover = "20261130T110000.000Z-cccccc"
    (here.runs / leftover).mkdir()
    for bad in ("20261130T110000.000Z-dddddd", leftover):
        with pytest.raises(NotFoundError):
            shared_pins.pin(here, config, bad)
    for change in (shared_pins.pin, shared_pins.unpin):
        with pytest.raises(InvalidNameError):  # as locally: never a path
            change(here, config, "../../etc")
    with pytest.raises(NotFoundError):
        shared_pins.unpin(here, config, "20261130T110000.000Z-dddddd")
    assert pinned_rows(config) == set()
    assert pin_files(here) == []


def test_a_pin_taken_while_prune_deletes_keeps_its_run(
    tmp_path: Path, config: RemoteConfig, pg_store: PostgresStore
) -> None:
    """Guards the race of pin and a remote prune: a prune that decided to delete a run
    waits for a pin in flight (the space's pin lock) and then keeps the run."""
    results: list[tuple[list[str], list[str]]] = []
    with shared_pins.connection(config) as conn:
        shared_pins.pin_lock(conn, config.space)  # a pin in flight: the lock held, its row not yet
        conn.execute("INSERT INTO fd_pins (space, run_id) VALUES (%s, %s)", (config.space, RUN_A))
        thread = threading.Thread(
            target=lambda: results.append(shared_pins.delete_unpinned(config, [RUN_A, RUN_B]))
        )
        thread.start()
        time.sleep(1.0)
        assert thread.is_alive()  # waiting for the pin's transaction
    thread.join(30)
    assert results == [([RUN_B], [RUN_A])]
    assert pg_store.run_ids() == [RUN_A]


def test_deleting_never_takes_a_live_run(config: RemoteConfig, pg_store: PostgresStore) -> None:
    """Guards remote prune against a run that went live after it was judged: the store
    keeps it (and says so by leaving it out of what was deleted)."""
    live = "20261130T120000.000Z-eeeeee"
    epoch = pg_store.claim("other", worker="w2")
    pg_store.publish("other", epoch, live, {"cycle.jsonl": b'{"event":"created"}\n'})
    assert shared_pins.delete_unpinned(config, [live, RUN_B]) == ([RUN_B], [])
    assert pg_store.run_ids() == [RUN_A, live]
