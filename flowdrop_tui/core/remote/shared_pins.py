"""Pins in remote mode: one table in PostgreSQL, copied into each replica's ``pins/``.

Locally a pin is an empty file ``.flowdrop/pins/<run-id>`` (``core/records/listing/pins.py``).
Remotely it must reach every machine, so the truth is a row of ``fd_pins``
(``space``, ``run_id``); each sync makes the replica's ``pins/`` folder hold exactly
the space's pins, so ``runs``, ``show`` and prune's rules (``core/retention.py``)
read them as they always did. Kept apart from the records' tables (``store.py``):
a pin is not a record write (no epoch, no run holds it) — anyone may pin any run.

Pinning and a remote prune exclude each other through one advisory lock per space
(``pin_lock``), the remote counterpart of the index lock locally: a prune checks the
pins again under that lock just before it deletes, so a pin that ``pin`` reports as
taken is a run that stays on every machine.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import Any

import psycopg

from flowdrop_tui.core.errors import NotFoundError, RecordsUnwritableError
from flowdrop_tui.core.paths import RUN_ID_RE, Layout, check_run_ref
from flowdrop_tui.core.remote.config import RemoteConfig
from flowdrop_tui.core.remote.postgres.store import PostgresStore

SCHEMA = """
CREATE TABLE IF NOT EXISTS fd_pins (
    space text NOT NULL,
    run_id text NOT NULL,
    pinned_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (space, run_id)
)
"""
_LOCK_CLASS = 0x66645F70  # "fd_p": the advisory lock's first key; the space is the second


@contextlib.contextmanager
def connection(config: RemoteConfig) -> Iterator[psycopg.Connection[Any]]:
    """A connection (the store's settings: bounded connect) with ``fd_pins`` in place,
    inside one transaction committed on leaving."""
    with PostgresStore(config.postgres, config.space).connect() as conn:
        with conn.transaction():
            # Two sessions creating the table at once race on the catalog: one waits.
            # Made once, by whoever comes first with the right to: a role of a
            # viewer or an operator has none, and must not try (docs/remote.md).
            made = conn.execute("SELECT to_regclass('fd_pins') IS NOT NULL").fetchone()
            if not (made and made[0]):
                conn.execute("SELECT pg_advisory_xact_lock(%s, 0)", (_LOCK_CLASS,))
                conn.execute(SCHEMA)
        with conn.transaction():
            yield conn


def pin_lock(conn: psycopg.Connection[Any], space: str) -> None:
    """Hold the space's pin lock until ``conn``'s transaction ends (pins vs prune)."""
    conn.execute("SELECT pg_advisory_xact_lock(%s, hashtext(%s))", (_LOCK_CLASS, space))


def pinned_in(conn: psycopg.Connection[Any], space: str) -> set[str]:
    rows = conn.execute("SELECT run_id FROM fd_pins WHERE space = %s", (space,)).fetchall()
    return {str(row[0]) for row in rows}


def _run_known(layout: Layout, run_id: str) -> bool:
    return (layout.runs / run_id).is_dir()


def pin(layout: Layout, config: RemoteConfig, run_id: str) -> bool:
    """Pin a run of the space (it must be in the replica, just synced); False: it was."""
    if not check_run_ref(run_id) or not _run_known(layout, run_id):
        raise NotFoundError(f"no run {run_id} in {config.space} (see: flowdrop-tui runs)")
    with connection(config) as conn:
        pin_lock(conn, config.space)
        # Checked under the lock: a run a prune just deleted is not pinned back to life.
        stored = conn.execute(
            "SELECT EXISTS (SELECT 1 FROM fd_runs WHERE space = %s AND run_id = %s)"
            " OR EXISTS (SELECT 1 FROM fd_files WHERE space = %s AND run_id = %s)",
            (config.space, run_id, config.space, run_id),
        ).fetchone()
        if not stored or not stored[0]:
            raise NotFoundError(f"no run {run_id} in {config.space} (see: flowdrop-tui runs)")
        added = conn.execute(
            "INSERT INTO fd_pins (space, run_id) VALUES (%s, %s) ON CONFLICT DO NOTHING",
            (config.space, run_id),
        ).rowcount
    _write_pin(layout, run_id)
    return added == 1


def unpin(layout: Layout, config: RemoteConfig, run_id: str) -> bool:
    """Unpin a run; False when it was not pinned. A pin of a run that is gone can be
    removed too; an unknown run that is not pinned is an error, as locally."""
    check_run_ref(run_id)
    with connection(config) as conn:
        pin_lock(conn, config.space)
        removed = conn.execute(
            "DELETE FROM fd_pins WHERE space = %s AND run_id = %s", (config.space, run_id)
        ).rowcount
    with contextlib.suppress(FileNotFoundError):
        (layout.pins / run_id).unlink()
    if removed == 0 and not _run_known(layout, run_id):
        raise NotFoundError(f"no run {run_id} in {config.space} (see: flowdrop-tui runs)")
    return removed == 1


def delete_unpinned(config: RemoteConfig, run_ids: list[str]) -> tuple[list[str], list[str]]:
    """Delete these runs through the store (``delete_runs``: never a live run) except
    those pinned, the pins read under the space's pin lock, held until the deletion is
    done. Returns (deleted, left because pinned)."""
    store = PostgresStore(config.postgres, config.space)
    try:
        with connection(config) as conn:
            pin_lock(conn, config.space)
            pinned = pinned_in(conn, config.space)
            wanted = [run_id for run_id in run_ids if run_id not in pinned]
            deleted = set(store.delete_runs(wanted))
    finally:
        store.close()
    kept = [run_id for run_id in run_ids if run_id in pinned]
    return [run_id for run_id in wanted if run_id in deleted], kept


def sync_pins(layout: Layout, config: RemoteConfig) -> None:
    """Make the replica's ``pins/`` hold exactly the space's pins."""
    with connection(config) as conn:
        wanted = pinned_in(conn, config.space)
    apply(layout, wanted)


def apply(layout: Layout, wanted: set[str]) -> None:
    try:
        present = {name for name in os.listdir(layout.pins) if RUN_ID_RE.match(name)}
    except FileNotFoundError:
        present = set()
    except OSError as exc:
        raise RecordsUnwritableError(f"cannot read {layout.pins}: {exc.strerror or exc}") from exc
    for run_id in sorted(wanted - present):
        _write_pin(layout, run_id)
    for run_id in sorted(present - wanted):
        with contextlib.suppress(FileNotFoundError):
            (layout.pins / run_id).unlink()


def _write_pin(layout: Layout, run_id: str) -> None:
    if not RUN_ID_RE.match(run_id):
        return  # a row no flowdrop wrote: never a path
    path = layout.pins / run_id
    try:
        layout.pins.mkdir(parents=True, exist_ok=True)
        path.touch()
    except OSError as exc:
        raise RecordsUnwritableError(
            f"cannot write the replica's pin {path}: {exc.strerror or exc}"
        ) from exc
