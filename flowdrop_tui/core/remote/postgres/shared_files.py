"""Files every machine of a space shares, in PostgreSQL: today ``limits.json``.

Locally ``.flowdrop/limits.json`` is one file every run of the workspace reads and
rewrites under ``limits.lock`` (``core/records/spend/limit_windows.py``). On workers each
run has a worktree of its own, so the truth is a row of ``fd_shared_files``
(``space``, ``name``, ``data``): ``held`` reads it ``FOR UPDATE`` inside one
transaction, the caller rewrites it there, and the row is written when the block
ends — so two workers closing, probing and clearing windows at once leave it exact,
as the lock does on one machine. Not a record write: no epoch, no run holds it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from flowdrop_tui.core.remote.postgres.store import PostgresStore

SCHEMA = """
CREATE TABLE IF NOT EXISTS fd_shared_files (
    space text NOT NULL,
    name text NOT NULL,
    data bytea NOT NULL,
    PRIMARY KEY (space, name)
)
"""
_LOCK_CLASS = 0x66645F73  # "fd_s": the advisory lock creating the table
NAMES = frozenset({"limits.json"})  # the files that are shared; nothing else is


class Held:
    """One shared file inside its transaction: ``data`` as the space has it (``None``:
    none yet); ``write(data)`` replaces it when the transaction commits."""

    def __init__(self, data: bytes | None) -> None:
        self.data = data
        self.written: bytes | None = None

    def write(self, data: bytes) -> None:
        self.written = data


@contextlib.contextmanager
def held(store: PostgresStore, name: str) -> Iterator[Held]:
    """``name`` of ``store``'s space, locked against every other machine until the
    block ends; what was written is committed then (nothing, if the block raised)."""
    if name not in NAMES:
        raise ValueError(f"{name!r} is not a shared file")
    with store.connect() as conn:
        with conn.transaction():
            # Made once, by whoever comes first with the right to: a role of a
            # viewer or an operator has none, and must not try (docs/remote.md).
            made = conn.execute("SELECT to_regclass('fd_shared_files') IS NOT NULL").fetchone()
            if not (made and made[0]):
                conn.execute("SELECT pg_advisory_xact_lock(%s, 0)", (_LOCK_CLASS,))
                conn.execute(SCHEMA)
        with conn.transaction():
            conn.execute(
                "INSERT INTO fd_shared_files (space, name, data) VALUES (%s, %s, '')"
                " ON CONFLICT DO NOTHING",
                (store.space, name),
            )
            row: Any = conn.execute(
                "SELECT data FROM fd_shared_files WHERE space = %s AND name = %s FOR UPDATE",
                (store.space, name),
            ).fetchone()
            found = bytes(row[0]) if row is not None and row[0] else None
            shared = Held(found)
            yield shared
            if shared.written is not None:
                conn.execute(
                    "UPDATE fd_shared_files SET data = %s WHERE space = %s AND name = %s",
                    (shared.written, store.space, name),
                )
