"""``PostgresStore``'s runs: which are live and where (``fd_runs``), every run of the
space, one run's row, and deleting runs (prune) or a whole space.
"""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg import sql

from flowdrop_tui.core.remote.postgres.login_words import unreachable
from flowdrop_tui.core.remote.postgres.store_connection import StoreConnection


class StoreRuns(StoreConnection):
    """A space's runs: liveness set and cleared (fenced), listed, read, deleted."""

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

    def run_ids(self) -> list[str]:
        """Every run of the space that has anything stored."""
        rows = self._rows(
            "SELECT run_id FROM fd_runs WHERE space = %s"
            " UNION SELECT run_id FROM fd_files WHERE space = %s ORDER BY 1",
            (self.space, self.space),
        )
        return [r for (r,) in rows]

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
