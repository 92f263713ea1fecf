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

import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from flowdrop_tui.core.errors import AlreadyRunningError, FlowdropError, RefusedError

CHANNEL = "fd_changes"
SCHEMA_VERSION = 1
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
# SQLSTATEs the schema's functions raise (class FD is ours).
_FENCED = "FD001"
_OUT_OF_ORDER = "FD002"
_ALREADY_RUNNING = "FD003"


class Fenced(RefusedError):
    """This writer's epoch is no longer its key's: another claim or the reaper moved
    it on. The writer must never write again."""

    code = "FENCED"


class StoreUnreachableError(FlowdropError):
    """PostgreSQL could not be reached or the connection broke mid-call. The call may
    or may not have committed; every write here is safe to send again."""

    code = "STORE_UNREACHABLE"


class StoreConflictError(FlowdropError):
    """Other bytes were already appended at that offset: the writer's file and the
    store's disagree."""

    code = "STORE_CONFLICT"


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


_SCHEMA = """
CREATE TABLE IF NOT EXISTS fd_schema (version integer NOT NULL);
CREATE TABLE IF NOT EXISTS fd_keys (
    space text NOT NULL,
    key text NOT NULL,
    epoch bigint NOT NULL DEFAULT 0,
    live_run text,
    claimed_by text,
    PRIMARY KEY (space, key)
);
CREATE TABLE IF NOT EXISTS fd_runs (
    space text NOT NULL,
    run_id text NOT NULL,
    key text NOT NULL,
    epoch bigint NOT NULL,
    worker text,
    host text,
    pid integer,
    live boolean NOT NULL DEFAULT false,
    updated timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (space, run_id)
);
CREATE INDEX IF NOT EXISTS fd_runs_live ON fd_runs (space) WHERE live;
CREATE TABLE IF NOT EXISTS fd_files (
    space text NOT NULL,
    run_id text NOT NULL,
    relpath text NOT NULL,
    data bytea NOT NULL,
    PRIMARY KEY (space, run_id, relpath)
);
CREATE TABLE IF NOT EXISTS fd_lines (
    space text NOT NULL,
    run_id text NOT NULL,
    relpath text NOT NULL,
    seq bigint NOT NULL,
    data bytea NOT NULL,
    PRIMARY KEY (space, run_id, relpath, seq)
);
CREATE TABLE IF NOT EXISTS fd_changes (
    id bigserial PRIMARY KEY,
    space text NOT NULL,
    run_id text NOT NULL,
    kind text NOT NULL,
    relpath text,
    seq bigint,
    at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS fd_changes_space ON fd_changes (space, id);
CREATE INDEX IF NOT EXISTS fd_changes_run ON fd_changes (space, run_id);

CREATE OR REPLACE FUNCTION fd_check_epoch(
    p_space text, p_key text, p_epoch bigint, p_update boolean
) RETURNS void LANGUAGE plpgsql AS $$
DECLARE current bigint;
BEGIN
    IF p_update THEN
        SELECT epoch INTO current FROM fd_keys
         WHERE space = p_space AND key = p_key FOR UPDATE;
    ELSE
        SELECT epoch INTO current FROM fd_keys
         WHERE space = p_space AND key = p_key FOR SHARE;
    END IF;
    IF current IS DISTINCT FROM p_epoch THEN
        RAISE EXCEPTION USING ERRCODE = 'FD001', MESSAGE = coalesce(current::text, 'none');
    END IF;
END $$;

CREATE OR REPLACE FUNCTION fd_change(
    p_space text, p_run text, p_kind text, p_relpath text, p_seq bigint
) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    -- held to the commit: ids of one space are handed out in commit order
    PERFORM pg_advisory_xact_lock(hashtext('fd_changes'), hashtext(p_space));
    INSERT INTO fd_changes (space, run_id, kind, relpath, seq)
    VALUES (p_space, p_run, p_kind, p_relpath, p_seq);
    PERFORM pg_notify('fd_changes', p_space);
END $$;

CREATE OR REPLACE FUNCTION fd_file_end(p_space text, p_run text, p_relpath text)
RETURNS bigint LANGUAGE sql STABLE AS $$
    SELECT coalesce(
        (SELECT seq + octet_length(data) FROM fd_lines
          WHERE space = p_space AND run_id = p_run AND relpath = p_relpath
          ORDER BY seq DESC LIMIT 1),
        (SELECT octet_length(data) FROM fd_files
          WHERE space = p_space AND run_id = p_run AND relpath = p_relpath),
        0)
$$;

CREATE OR REPLACE FUNCTION fd_put_file(
    p_space text, p_run text, p_relpath text, p_data bytea
) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO fd_files (space, run_id, relpath, data)
    VALUES (p_space, p_run, p_relpath, p_data)
    ON CONFLICT (space, run_id, relpath) DO UPDATE SET data = EXCLUDED.data;
    -- a whole write replaces what was appended before it
    DELETE FROM fd_lines WHERE space = p_space AND run_id = p_run AND relpath = p_relpath;
END $$;

CREATE OR REPLACE FUNCTION fd_write_file(
    p_space text, p_key text, p_epoch bigint, p_run text, p_relpath text, p_data bytea
) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    PERFORM fd_check_epoch(p_space, p_key, p_epoch, false);
    PERFORM fd_put_file(p_space, p_run, p_relpath, p_data);
    PERFORM fd_change(p_space, p_run, 'file', p_relpath, NULL);
END $$;

CREATE OR REPLACE FUNCTION fd_append_line(
    p_space text, p_key text, p_epoch bigint, p_run text, p_relpath text, p_data bytea,
    p_offset bigint
) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE at_offset bigint;
BEGIN
    PERFORM fd_check_epoch(p_space, p_key, p_epoch, false);
    -- the writer owns the file and says where its bytes landed; appends from two
    -- connections of one writer may commit in either order (a reader stops at a gap)
    at_offset := coalesce(p_offset, fd_file_end(p_space, p_run, p_relpath));
    INSERT INTO fd_lines (space, run_id, relpath, seq, data)
    VALUES (p_space, p_run, p_relpath, at_offset, p_data)
    ON CONFLICT (space, run_id, relpath, seq) DO NOTHING;
    IF NOT FOUND THEN
        -- the same bytes already there: a resend of an append that did commit
        IF EXISTS (SELECT 1 FROM fd_lines
                    WHERE space = p_space AND run_id = p_run AND relpath = p_relpath
                      AND seq = at_offset AND data = p_data) THEN
            RETURN at_offset;
        END IF;
        RAISE EXCEPTION USING ERRCODE = 'FD002',
            MESSAGE = format('other bytes were already appended at byte %s', at_offset);
    END IF;
    PERFORM fd_change(p_space, p_run, 'line', p_relpath, at_offset);
    RETURN at_offset;
END $$;

CREATE OR REPLACE FUNCTION fd_publish(
    p_space text, p_key text, p_epoch bigint, p_run text, p_relpaths text[], p_datas bytea[]
) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    PERFORM fd_check_epoch(p_space, p_key, p_epoch, false);
    -- the process publishing a record holds it: live from its first moment
    INSERT INTO fd_runs (space, run_id, key, epoch, live)
    VALUES (p_space, p_run, p_key, p_epoch, true)
    ON CONFLICT (space, run_id) DO UPDATE
        SET key = EXCLUDED.key, epoch = EXCLUDED.epoch, live = true, updated = now();
    FOR i IN 1 .. coalesce(array_length(p_relpaths, 1), 0) LOOP
        PERFORM fd_put_file(p_space, p_run, p_relpaths[i], p_datas[i]);
    END LOOP;
    PERFORM fd_change(p_space, p_run, 'publish', NULL, NULL);
END $$;

CREATE OR REPLACE FUNCTION fd_set_live(
    p_space text, p_key text, p_epoch bigint, p_run text,
    p_worker text, p_host text, p_pid integer
) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    PERFORM fd_check_epoch(p_space, p_key, p_epoch, true);
    UPDATE fd_keys SET live_run = p_run WHERE space = p_space AND key = p_key;
    INSERT INTO fd_runs (space, run_id, key, epoch, worker, host, pid, live)
    VALUES (p_space, p_run, p_key, p_epoch, p_worker, p_host, p_pid, true)
    ON CONFLICT (space, run_id) DO UPDATE
        SET key = EXCLUDED.key, epoch = EXCLUDED.epoch, worker = EXCLUDED.worker,
            host = EXCLUDED.host, pid = EXCLUDED.pid, live = true, updated = now();
    PERFORM fd_change(p_space, p_run, 'live', NULL, NULL);
END $$;

CREATE OR REPLACE FUNCTION fd_end_live(p_space text, p_key text, p_run text, p_epoch bigint)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE ended text;
BEGIN
    -- the key's process ended (its epoch was checked) or was reaped: whatever run of
    -- it the key names (a `flowdrop-tui run` the flow started, too) is over
    UPDATE fd_keys SET live_run = NULL WHERE space = p_space AND key = p_key;
    -- every run the key's process held (its own, and runs of keys it called)
    FOR ended IN
        UPDATE fd_runs SET live = false, updated = now()
         WHERE space = p_space AND live
           AND (run_id = p_run OR (key = p_key AND (p_epoch IS NULL OR epoch = p_epoch)))
        RETURNING run_id
    LOOP
        PERFORM fd_change(p_space, ended, 'live', NULL, NULL);
    END LOOP;
END $$;

CREATE OR REPLACE FUNCTION fd_clear_live(p_space text, p_key text, p_epoch bigint, p_run text)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    PERFORM fd_check_epoch(p_space, p_key, p_epoch, true);
    PERFORM fd_end_live(p_space, p_key, p_run, p_epoch);
END $$;

CREATE OR REPLACE FUNCTION fd_bump(p_space text, p_key text) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE new_epoch bigint;
BEGIN
    INSERT INTO fd_keys (space, key) VALUES (p_space, p_key) ON CONFLICT DO NOTHING;
    -- FOR UPDATE waits for every write in flight (they hold FOR SHARE)
    SELECT epoch + 1 INTO new_epoch FROM fd_keys WHERE space = p_space AND key = p_key FOR UPDATE;
    UPDATE fd_keys SET epoch = new_epoch WHERE space = p_space AND key = p_key;
    RETURN new_epoch;
END $$;

CREATE OR REPLACE FUNCTION fd_claim(p_space text, p_key text, p_worker text) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE holder text; new_epoch bigint;
BEGIN
    INSERT INTO fd_keys (space, key) VALUES (p_space, p_key) ON CONFLICT DO NOTHING;
    SELECT live_run INTO holder FROM fd_keys
     WHERE space = p_space AND key = p_key FOR UPDATE;
    IF holder IS NOT NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'FD003', MESSAGE = holder;
    END IF;
    UPDATE fd_keys SET epoch = epoch + 1, claimed_by = p_worker
     WHERE space = p_space AND key = p_key RETURNING epoch INTO new_epoch;
    RETURN new_epoch;
END $$;

CREATE OR REPLACE FUNCTION fd_reap(p_space text, p_key text, p_run text) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE new_epoch bigint;
BEGIN
    new_epoch := fd_bump(p_space, p_key);
    PERFORM fd_end_live(p_space, p_key, p_run, NULL);
    RETURN new_epoch;
END $$;

CREATE OR REPLACE FUNCTION fd_delete_runs(p_space text, p_runs text[]) RETURNS SETOF text
LANGUAGE plpgsql AS $$
DECLARE gone text;
BEGIN
    -- locked first: a run cannot turn live between the check and the delete
    PERFORM 1 FROM fd_runs WHERE space = p_space AND run_id = ANY(p_runs) FOR UPDATE;
    FOR gone IN
        SELECT r FROM unnest(p_runs) AS r
         WHERE NOT EXISTS (SELECT 1 FROM fd_runs
                            WHERE space = p_space AND run_id = r AND live)
           AND (EXISTS (SELECT 1 FROM fd_runs WHERE space = p_space AND run_id = r)
                OR EXISTS (SELECT 1 FROM fd_files WHERE space = p_space AND run_id = r)
                OR EXISTS (SELECT 1 FROM fd_lines WHERE space = p_space AND run_id = r))
    LOOP
        DELETE FROM fd_files WHERE space = p_space AND run_id = gone;
        DELETE FROM fd_lines WHERE space = p_space AND run_id = gone;
        DELETE FROM fd_runs WHERE space = p_space AND run_id = gone;
        -- older changes of the run now point at nothing; the delete supersedes them
        DELETE FROM fd_changes WHERE space = p_space AND run_id = gone;
        PERFORM fd_change(p_space, gone, 'delete', NULL, NULL);
        RETURN NEXT gone;
    END LOOP;
END $$;
"""


class PostgresStore:
    """One space's records in one PostgreSQL database, over one connection.

    Thread-safe (calls are serialised); a broken connection is reopened on the next
    call. ``StoreUnreachableError`` when the server cannot be reached."""

    def __init__(self, url: str, space: str) -> None:
        self.url = url
        self.space = space
        self._conn: psycopg.Connection[Any] | None = None
        self._lock = threading.RLock()

    # --- connection -----------------------------------------------------------------

    def connect(self) -> psycopg.Connection[Any]:
        """A new autocommit connection with this store's settings (``LISTEN`` uses one)."""
        try:
            given = conninfo_to_dict(self.url)
        except psycopg.ProgrammingError as exc:
            raise FlowdropError(
                f"invalid PostgreSQL URL {_redacted(self.url)!r}: {exc}; "
                "give one like postgresql://user@host:5432/dbname",
                code="USAGE",
            ) from exc
        extra = {k: v for k, v in _CONNECT_DEFAULTS.items() if k not in given}
        try:
            return psycopg.connect(make_conninfo(self.url, **extra), autocommit=True)
        except psycopg.OperationalError as exc:
            raise _unreachable(self.url, exc) from exc

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
            except (psycopg.OperationalError, psycopg.InterfaceError) as exc:
                if exc.sqlstate in (_FENCED, _OUT_OF_ORDER, _ALREADY_RUNNING):
                    raise
                self._drop()
                raise _unreachable(self.url, exc) from exc

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
        """Create the tables and functions if missing; safe to call any number of times,
        from many processes at once (one advisory lock serialises them)."""
        with self._lock:
            try:
                conn = self._connection()
                with conn.transaction(), conn.cursor() as cur:
                    cur.execute("SELECT pg_advisory_xact_lock(hashtext('fd_schema'))")
                    cur.execute(_SCHEMA)
                    cur.execute("SELECT version FROM fd_schema")
                    if cur.fetchone() is None:
                        cur.execute("INSERT INTO fd_schema VALUES (%s)", (SCHEMA_VERSION,))
            except (psycopg.OperationalError, psycopg.InterfaceError) as exc:
                self._drop()
                raise _unreachable(self.url, exc) from exc

    # --- keys -----------------------------------------------------------------------

    def claim(self, key: str, *, worker: str) -> int:
        """A new epoch for ``key``; ``AlreadyRunningError`` when the key has a live run.

        An earlier claimant that never went live is fenced out by the new epoch."""
        return int(self._call("SELECT fd_claim(%s, %s, %s)", (self.space, key, worker), key, None))

    def fence(self, key: str) -> int:
        """Bump ``key``'s epoch unconditionally (waiting for writes in flight); the new one."""
        return int(self._call("SELECT fd_bump(%s, %s)", (self.space, key), key, None))

    def reap(self, key: str, run_id: str | None) -> int:
        """Fence ``key`` and clear the liveness of its runs (``run_id`` and every run the
        key's lost process held): they then read as interrupted. The new epoch."""
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
                    for table in ("fd_changes", "fd_lines", "fd_files", "fd_runs", "fd_keys"):
                        cur.execute(
                            sql.SQL("DELETE FROM {} WHERE space = %s").format(
                                sql.Identifier(table)
                            ),
                            (self.space,),
                        )
            except (psycopg.OperationalError, psycopg.InterfaceError) as exc:
                self._drop()
                raise _unreachable(self.url, exc) from exc


def iter_notifies(conn: psycopg.Connection[Any], space: str, timeout: float) -> Iterator[None]:
    """Yield once per ``NOTIFY fd_changes`` for ``space`` arriving within ``timeout``
    seconds on ``conn`` (which must ``LISTEN fd_changes``)."""
    for note in conn.notifies(timeout=timeout):
        if note.payload == space:
            yield None


def _redacted(url: str) -> str:
    """The URL without its password (it goes into messages)."""
    try:
        parts = conninfo_to_dict(url)
    except psycopg.Error:
        return "<unparsable URL>"
    parts.pop("password", None)
    host = parts.get("host", "localhost")
    port = parts.get("port", "5432")
    return f"{parts.get('user', '')}@{host}:{port}/{parts.get('dbname', '')}"


def _unreachable(url: str, exc: BaseException) -> StoreUnreachableError:
    reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return StoreUnreachableError(
        f"cannot reach PostgreSQL at {_redacted(url)}: {reason}; check that the server "
        "is running and FLOWDROP_POSTGRES (or [remote] postgres) points at it"
    )
