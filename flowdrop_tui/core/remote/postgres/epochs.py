"""``PostgresStore``'s epochs and fencing: a key claimed, fenced and reaped (each bump
waits for the writes in flight), and the workers' leases (of no space: a worker serves
them all).
"""

from __future__ import annotations

import psycopg

from flowdrop_tui.core.errors import UsageError
from flowdrop_tui.core.remote.postgres.store_connection import _WORKER_HELD, StoreConnection


class StoreEpochs(StoreConnection):
    """A key's epoch (``claim``, ``fence``, ``reap``, ``key_epoch``) and a worker id's lease."""

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

    def key_epoch(self, key: str) -> int:
        """The key's current epoch (0 for a key never claimed)."""
        rows = self._rows(
            "SELECT epoch FROM fd_keys WHERE space = %s AND key = %s", (self.space, key)
        )
        return int(rows[0][0]) if rows else 0

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
