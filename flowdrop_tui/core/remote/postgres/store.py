"""Remote records in PostgreSQL: the schema, claiming and fencing a key, fenced writes.

PostgreSQL is the truth for remote records (docs/remote.md, "Records in PostgreSQL").
A file of a run is its last whole write (``fd_files``) followed by what was appended
to it since (``fd_lines``, keyed by byte offset), so a replica rebuilds it byte for
byte. Every write is fenced: it carries the epoch its writer was given for the flow
key it runs under and is refused (``Fenced``) once that key's epoch moved on.

Each operation is ONE statement calling a function of the schema, so ONE round trip
and ONE transaction: it locks the key's ``fd_keys`` row ``FOR SHARE`` (``fence``,
``claim`` and ``reap`` take it ``FOR UPDATE``, so a bump waits for a write in flight
and every later write sees the bump), compares the epoch, writes, appends a row to
``fd_changes`` (the feed replicas follow) and ``NOTIFY fd_changes, '<space>'``.

Change ids are handed out in commit order within a space (a transaction-scoped
advisory lock is taken just before the change row is inserted and held to the
commit): a replica reading "every change after the last id I applied" can then never
skip a change that committed later with a smaller id.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import TracebackType

from flowdrop_tui.core.remote.postgres.epochs import StoreEpochs
from flowdrop_tui.core.remote.postgres.store_files import StoreFiles
from flowdrop_tui.core.remote.postgres.store_runs import StoreRuns

CHANNEL = "fd_changes"


@dataclass(frozen=True)
class Change:
    """One row of the feed: ``kind`` is ``file`` (a whole write of ``relpath``),
    ``line`` (an append to ``relpath`` at byte ``seq``), ``publish`` (a new record),
    ``live`` (the run's liveness changed) or ``delete`` (the run was pruned)."""

    id: int
    run_id: str
    kind: str
    relpath: str | None
    seq: int | None


class PostgresStore(StoreEpochs, StoreFiles, StoreRuns):
    """One space's records in one PostgreSQL database, over one connection.

    Its parts, by what a reader comes to change: the connection and the schema
    (``StoreConnection``), a key's epochs and the workers' leases (``StoreEpochs``), a
    run's files (``StoreFiles``), the runs (``StoreRuns``); here, the change feed.
    Thread-safe (calls are serialised); a broken connection is reopened on the next
    call. ``StoreUnreachableError`` when the server cannot be reached."""

    def __enter__(self) -> PostgresStore:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def changes_after(self, last_id: int, limit: int = 1000) -> list[Change]:
        """The feed after ``last_id``, oldest first, at most ``limit`` rows."""
        rows = self._rows(
            "SELECT id, run_id, kind, relpath, seq FROM fd_changes"
            " WHERE space = %s AND id > %s ORDER BY id LIMIT %s",
            (self.space, last_id, limit),
        )
        return [Change(int(i), r, k, p, None if s is None else int(s)) for i, r, k, p, s in rows]

    def last_change_id(self) -> int:
        rows = self._rows(
            "SELECT coalesce(max(id), 0) FROM fd_changes WHERE space = %s", (self.space,)
        )
        return int(rows[0][0])
