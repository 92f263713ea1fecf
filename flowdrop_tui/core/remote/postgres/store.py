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

import getpass
import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any

import psycopg
from psycopg import sql
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

CHANNEL = "fd_changes"
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


class PostgresStore:
    """One space's records in one PostgreSQL database, over one connection.

    Thread-safe (calls are serialised); a broken connection is reopened on the next
    call. ``StoreUnreachableError`` when the server cannot be reached."""

    def __init__(self, url: str, space: str) -> None:
        self.url = url
        self.space = space
        self._conn: psycopg.Connection[Any] | None = None
        self._lock = threading.RLock()
        self._schema_ready = False

    # --- connection -----------------------------------------------------------------

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

    def __enter__(self) -> PostgresStore:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

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

    # --- schema ---------------------------------------------------------------------

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

    # --- keys -----------------------------------------------------------------------

    def claim(self, key: str, *, worker: str) -> int:
        """A new epoch for ``key``; ``AlreadyRunningError`` when the key has a live run.

        An earlier claimant that never went live is fenced out by the new epoch."""
        return int(self._call("SELECT fd_claim(%s, %s, %s)", (self.space, key, worker), key, None))

    def fence(self, key: str) -> int:
        """Bump ``key``'s epoch unconditionally (waiting for writes in flight); the new one."""
        return int(self._call("SELECT fd_bump(%s, %s)", (self.space, key), key, None))

    def reap(self, key: str, run_id: str | None, epoch: int | None = None) -> int:
        """Fence ``key`` and clear the liveness of its runs (``run_id`` and every run the
        key's lost process held): they then read as interrupted. The new epoch.

        With ``epoch`` (the lost holder's), only while the key is still at it: a reap
        that comes late, after a later claim, changes nothing (the key's epoch)."""
        if epoch is not None:
            return int(
                self._call(
                    "SELECT fd_reap_epoch(%s, %s, %s, %s)",
                    (self.space, key, epoch, run_id),
                    key,
                    None,
                )
            )
        return int(self._call("SELECT fd_reap(%s, %s, %s)", (self.space, key, run_id), key, None))

    # --- fenced writes --------------------------------------------------------------

    def write_file(self, key: str, epoch: int, run_id: str, relpath: str, data: bytes) -> None:
        """Replace the run's file ``relpath`` (relative to its folder) whole."""
        self._call(
            "SELECT fd_write_file(%s, %s, %s, %s, %s, %s)",
            (self.space, key, epoch, run_id, relpath, data),
            key,
            epoch,
        )

    def append_line(
        self,
        key: str,
        epoch: int,
        run_id: str,
        relpath: str,
        data: bytes,
        *,
        offset: int | None = None,
    ) -> int:
        """Append ``data`` to the run's file ``relpath``; the byte offset it landed at.

        ``offset``, when given, is where the writer's own file had it (else: where the
        stored file ends). Sending the same append again (the connection broke before
        the answer) is a no-op; other bytes at that offset raise ``StoreConflictError``.
        Appends may commit out of order (a writer's threads, a signal handler's write
        on a connection of its own): readers stop at a gap until it is filled."""
        return int(
            self._call(
                "SELECT fd_append_line(%s, %s, %s, %s, %s, %s, %s)",
                (self.space, key, epoch, run_id, relpath, data, offset),
                key,
                epoch,
            )
        )

    def publish(self, key: str, epoch: int, run_id: str, files: dict[str, bytes]) -> None:
        """A whole new record at once (its ``.new-`` folder renamed into place): its
        files, and the run marked live (its publisher holds it)."""
        names = sorted(files)
        self._call(
            "SELECT fd_publish(%s, %s, %s, %s, %s, %s)",
            (self.space, key, epoch, run_id, names, [files[n] for n in names]),
            key,
            epoch,
        )

    def set_live(
        self, key: str, epoch: int, run_id: str, *, worker: str, host: str, pid: int
    ) -> None:
        """Record that ``run_id`` is held by ``pid`` on ``host`` for ``worker``."""
        self._call(
            "SELECT fd_set_live(%s, %s, %s, %s, %s, %s, %s)",
            (self.space, key, epoch, run_id, worker, host, pid),
            key,
            epoch,
        )

    def clear_live(self, key: str, epoch: int, run_id: str) -> None:
        """The run's process ended: it, and every run that process held, are not live."""
        self._call(
            "SELECT fd_clear_live(%s, %s, %s, %s)",
            (self.space, key, epoch, run_id),
            key,
            epoch,
        )

    # --- workers' leases (not of a space: a worker serves them all) ---------------------

    def worker_beat(
        self, worker: str, token: str, host: str, pid: int, *, fresh: float, take: bool = False
    ) -> None:
        """Renew this process's (``token``) lease on the worker id ``worker``.
        ``UsageError`` when another process renewed it within ``fresh`` seconds (unless
        ``take``): two workers of one id would share its queue and its runs' liveness."""
        try:
            self._rows(
                "SELECT fd_worker_beat(%s, %s, %s, %s, %s, %s)",
                (worker, token, host, pid, fresh, take),
            )
        except psycopg.Error as exc:
            if exc.sqlstate != _WORKER_HELD:
                raise
            other_host, other_pid, age = (exc.diag.message_primary or "? 0 ?").split(" ", 2)
            raise UsageError(
                f"another worker with the id {worker!r} is alive (pid {other_pid} on host "
                f"{other_host}, seen {age} s ago); give each worker its own --id, or stop "
                "that one first"
            ) from None

    def worker_holder(self, worker: str) -> tuple[str, int] | None:
        """The host and pid that last held ``worker``'s lease (``None``: never held)."""
        rows = self._rows("SELECT host, pid FROM fd_workers WHERE worker = %s", (worker,))
        return (str(rows[0][0]), int(rows[0][1] or 0)) if rows else None

    def worker_age(self, worker: str) -> float | None:
        """Seconds since ``worker``'s lease was last renewed (by the server's clock);
        ``None`` when no worker of that id ever held one."""
        rows = self._rows("SELECT fd_worker_age(%s)", (worker,))
        return None if not rows or rows[0][0] is None else float(rows[0][0])

    # --- reads ----------------------------------------------------------------------

    def live_runs(self) -> dict[str, dict[str, Any]]:
        """Every live run of the space: ``{run_id: {key, epoch, worker, host, pid, since}}``."""
        rows = self._rows(
            "SELECT run_id, key, epoch, worker, host, pid, updated FROM fd_runs"
            " WHERE space = %s AND live ORDER BY run_id",
            (self.space,),
        )
        return {
            run_id: {
                "key": key,
                "epoch": epoch,
                "worker": worker,
                "host": host,
                "pid": pid,
                "since": updated.timestamp(),
            }
            for run_id, key, epoch, worker, host, pid, updated in rows
        }

    def key_epoch(self, key: str) -> int:
        """The key's current epoch (0 for a key never claimed)."""
        rows = self._rows(
            "SELECT epoch FROM fd_keys WHERE space = %s AND key = %s", (self.space, key)
        )
        return int(rows[0][0]) if rows else 0

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

    def run_ids(self) -> list[str]:
        """Every run of the space that has anything stored."""
        rows = self._rows(
            "SELECT run_id FROM fd_runs WHERE space = %s"
            " UNION SELECT run_id FROM fd_files WHERE space = %s ORDER BY 1",
            (self.space, self.space),
        )
        return [r for (r,) in rows]

    def relpaths(self, run_id: str) -> list[str]:
        """Every file stored for a run (whole or appended)."""
        rows = self._rows(
            "SELECT relpath FROM fd_files WHERE space = %s AND run_id = %s"
            " UNION SELECT DISTINCT relpath FROM fd_lines WHERE space = %s AND run_id = %s"
            " ORDER BY 1",
            (self.space, run_id, self.space, run_id),
        )
        return [r for (r,) in rows]

    def read_file(self, run_id: str, relpath: str, start: int = 0) -> bytes | None:
        """A stored file's bytes from ``start`` on, up to its first gap (an append whose
        predecessor has not committed yet); None when nothing is stored for it."""
        with self._lock:
            base = self._rows(
                "SELECT octet_length(data), substring(data from %s) FROM fd_files"
                " WHERE space = %s AND run_id = %s AND relpath = %s",
                (start + 1, self.space, run_id, relpath),
            )
            lines = self._rows(
                "SELECT seq, data FROM fd_lines WHERE space = %s AND run_id = %s"
                " AND relpath = %s AND seq + octet_length(data) > %s ORDER BY seq",
                (self.space, run_id, relpath, start),
            )
        if not base and not lines:
            return None
        chunks: list[bytes] = []
        end = 0
        if base:
            end = int(base[0][0])
            chunks.append(bytes(base[0][1]))
        end = max(end, start)
        for seq, data in lines:
            seq = int(seq)
            if seq > end:
                break  # a gap: what follows is not readable yet
            chunk = bytes(data)[end - seq :]
            chunks.append(chunk)
            end += len(chunk)
        return b"".join(chunks)

    def run_info(self, run_id: str) -> dict[str, Any] | None:
        """The run's row: ``{key, epoch, worker, host, pid, live}`` (None when absent)."""
        rows = self._rows(
            "SELECT key, epoch, worker, host, pid, live FROM fd_runs"
            " WHERE space = %s AND run_id = %s",
            (self.space, run_id),
        )
        if not rows:
            return None
        key, epoch, worker, host, pid, live = rows[0]
        return {
            "key": key,
            "epoch": epoch,
            "worker": worker,
            "host": host,
            "pid": pid,
            "live": live,
        }

    def delete_runs(self, run_ids: list[str]) -> list[str]:
        """Delete these runs' records (prune); never a live run. The ids deleted."""
        if not run_ids:
            return []
        rows = self._rows("SELECT fd_delete_runs(%s, %s)", (self.space, list(run_ids)))
        return [r for (r,) in rows]

    def drop_space(self) -> None:
        """Remove every row of this space (tests; a team retiring a repository)."""
        with self._lock:
            try:
                conn = self._connection()
                with conn.transaction(), conn.cursor() as cur:
                    for table in (
                        "fd_changes",
                        "fd_lines",
                        "fd_files",
                        "fd_runs",
                        "fd_keys",
                        "fd_starts",
                    ):
                        cur.execute(
                            sql.SQL("DELETE FROM {} WHERE space = %s").format(
                                sql.Identifier(table)
                            ),
                            (self.space,),
                        )
            except (psycopg.OperationalError, psycopg.InterfaceError) as exc:
                self._drop()
                raise unreachable(self.url, exc) from exc
