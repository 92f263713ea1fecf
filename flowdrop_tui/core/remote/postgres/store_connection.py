"""``PostgresStore``'s connection: one per store, reopened when broken; one statement,
one transaction (``_rows``); the schema's errors worded (``_translated``); the schema
made or brought up to date (``ensure_schema``). The store's other parts
(``epochs``, ``store_files``, ``store_runs``) build on it; ``store.py`` joins them.
"""

from __future__ import annotations

import getpass
import os
import threading
from collections.abc import Sequence
from typing import Any

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from flowdrop_tui.core.errors import (
    AlreadyRunningError,
    FlowdropError,
    UsageError,
)
from flowdrop_tui.core.remote.postgres.login_words import refused, unreachable
from flowdrop_tui.core.remote.postgres.schema import SCHEMA, SCHEMA_VERSION
from flowdrop_tui.core.remote.remote_errors import (
    Fenced,
    NotPermittedError,
    StoreConflictError,
    StoreError,
)

# Connection settings applied unless the URL sets them: a server that went away is
# noticed in seconds (a partitioned worker's write must fail, not hang for minutes).
_CONNECT_DEFAULTS = {
    "connect_timeout": "5",
    "keepalives": "1",
    "keepalives_idle": "5",
    "keepalives_interval": "2",
    "keepalives_count": "3",
    "tcp_user_timeout": "10000",
    "application_name": "flowdrop",
}
# SQLSTATEs the schema's functions raise (class FD is ours; schema.py).
_FENCED = "FD001"
_OUT_OF_ORDER = "FD002"
_ALREADY_RUNNING = "FD003"
_WORKER_HELD = "FD004"
_NO_PRIVILEGE = "42501"  # insufficient_privilege: a role's grants do not allow it


class StoreConnection:
    """One space's store over one connection: what every part of ``PostgresStore`` calls.

    Thread-safe (calls are serialised); a broken connection is reopened on the next
    call. ``StoreUnreachableError`` when the server cannot be reached."""

    def __init__(self, url: str, space: str) -> None:
        self.url = url
        self.space = space
        self._conn: psycopg.Connection[Any] | None = None
        self._lock = threading.RLock()
        self._schema_ready = False

    def connect(self) -> psycopg.Connection[Any]:
        """A new autocommit connection with this store's settings (``LISTEN`` uses one)."""
        try:
            given = conninfo_to_dict(self.url)
        except psycopg.ProgrammingError as exc:
            reason = " ".join(str(exc).split())  # libpq's text ends in a line break
            raise UsageError(
                f"invalid PostgreSQL URL (FLOWDROP_POSTGRES or [remote] postgres): {reason}; "
                "give one like postgresql://user@host:5432/dbname"
            ) from exc
        extra = {k: v for k, v in _CONNECT_DEFAULTS.items() if k not in given}
        try:
            return psycopg.connect(make_conninfo(self.url, **extra), autocommit=True)
        except psycopg.OperationalError as exc:
            raise (refused(given, exc) or unreachable(self.url, exc)) from exc

    def _connection(self) -> psycopg.Connection[Any]:
        if self._conn is None or self._conn.closed or self._conn.broken:
            self._drop()
            self._conn = self.connect()
        return self._conn

    def _drop(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                conn.close()
            except psycopg.Error:
                pass

    def close(self) -> None:
        with self._lock:
            self._drop()

    def _rows(self, query: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
        """Run one statement (its own transaction); its rows. Errors of the schema's
        functions become the core's errors; a broken connection ``StoreUnreachableError``."""
        with self._lock:
            try:
                with self._connection().cursor() as cur:
                    cur.execute(query, params)
                    return cur.fetchall() if cur.description is not None else []
            except psycopg.Error as exc:
                if exc.sqlstate in (_FENCED, _OUT_OF_ORDER, _ALREADY_RUNNING, _WORKER_HELD):
                    raise  # the caller words them (_translated)
                if isinstance(exc, (psycopg.OperationalError, psycopg.InterfaceError)):
                    # Gone, or failing for now (a restart, a full disk, a deadlock
                    # broken): the caller may send it again on a new connection.
                    self._drop()
                    raise unreachable(self.url, exc) from exc
                if exc.sqlstate == _NO_PRIVILEGE:
                    raise NotPermittedError(
                        f"PostgreSQL refused it to role {self._role()}: "
                        f"{exc.diag.message_primary or exc} (remote mode's roles: viewer "
                        "reads, operator starts and pins, worker and admin write the "
                        'records, admin prunes and reaps; see docs/remote.md, "Who can '
                        'do what")'
                    ) from exc
                raise StoreError(
                    f"PostgreSQL refused a request ({exc.sqlstate}): "
                    f"{exc.diag.message_primary or exc}"
                ) from exc

    def _role(self) -> str:
        """The database role this store logs in as (from its URL, as libpq reads it)."""
        try:
            user = conninfo_to_dict(self.url).get("user")
        except psycopg.Error:
            user = None
        return repr(user or os.environ.get("PGUSER") or getpass.getuser())

    def may_operate(self, role: str | None) -> bool:
        """Whether runs of this space may be started at the ask of database role ``role``
        (``fd_may_operate``: a superuser, the tables' owner, or granted operator here)."""
        rows = self._rows("SELECT fd_may_operate(%s, %s)", (self.space, role))
        return bool(rows and rows[0][0])

    def rows(self, query: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
        """One statement of a table kept elsewhere (``start_requests``), as ``_rows``."""
        return self._rows(query, params)

    def _call(self, query: str, params: Sequence[Any], key: str, epoch: int | None) -> Any:
        try:
            rows = self._rows(query, params)
        except psycopg.Error as exc:
            raise self._translated(exc, key, epoch) from exc
        return rows[0][0] if rows else None

    def _translated(self, exc: psycopg.Error, key: str, epoch: int | None) -> Exception:
        detail = exc.diag.message_primary or ""
        if exc.sqlstate == _FENCED:
            return Fenced(
                f"fenced out: this writer holds epoch {epoch} of key {key!r} in space "
                f"{self.space!r}, but the key's epoch is now {detail} (another worker "
                "claimed it, or this one was declared lost); it must not write again"
            )
        if exc.sqlstate == _ALREADY_RUNNING:
            return AlreadyRunningError(self._running_message(key, detail))
        if exc.sqlstate == _OUT_OF_ORDER:
            return StoreConflictError(f"key {key!r}: {detail}")
        return exc

    def _running_message(self, key: str, run_id: str) -> str:
        where = ""
        try:
            rows = self._rows(
                "SELECT worker, host, pid FROM fd_runs WHERE space = %s AND run_id = %s",
                (self.space, run_id),
            )
        except (psycopg.Error, FlowdropError):
            rows = []
        if rows:
            worker, host, pid = rows[0]
            where = f" on worker {worker or '?'} (host {host or '?'}, pid {pid or '?'})"
        return (
            f"flow key {key!r} is already running as run {run_id}{where}; "
            "stop it first, or wait for it to end"
        )

    def ensure_schema(self) -> None:
        """Create or bring up to date the tables and functions; safe to call any number
        of times, from many processes at once (one advisory lock serialises them).
        A schema already at this version costs one read: no DDL, no lock."""
        if self._schema_ready or self._schema_version() >= SCHEMA_VERSION:
            self._schema_ready = True
            return
        with self._lock:
            try:
                conn = self._connection()
                with conn.transaction(), conn.cursor() as cur:
                    cur.execute("SELECT pg_advisory_xact_lock(hashtext('fd_schema'))")
                    cur.execute(SCHEMA)
                    cur.execute("SELECT version FROM fd_schema")
                    if cur.fetchone() is None:
                        cur.execute("INSERT INTO fd_schema VALUES (%s)", (SCHEMA_VERSION,))
                    else:
                        cur.execute("UPDATE fd_schema SET version = %s", (SCHEMA_VERSION,))
            except (psycopg.OperationalError, psycopg.InterfaceError) as exc:
                self._drop()
                raise unreachable(self.url, exc) from exc
            except psycopg.Error as exc:
                raise StoreError(
                    f"cannot create remote mode's tables in PostgreSQL: "
                    f"{exc.diag.message_primary or exc}; the user in the URL needs CREATE "
                    "on the database (or have someone run flowdrop-tui worker once)"
                ) from exc
        self._schema_ready = True

    def _schema_version(self) -> int:
        try:
            rows = self._rows("SELECT max(version) FROM fd_schema", ())
        except StoreError:
            return 0  # no fd_schema yet
        return int(rows[0][0]) if rows and rows[0][0] is not None else 0
