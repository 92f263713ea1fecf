"""``PostgresStore``'s files: a run's file is its last whole write (``fd_files``) and
what was appended since (``fd_lines``, by byte offset); written fenced by the key's
epoch, read back up to the first gap.
"""

from __future__ import annotations

from flowdrop_tui.core.remote.postgres.store_connection import StoreConnection


class StoreFiles(StoreConnection):
    """A run's files: fenced writes (``write_file``, ``append_line``, ``publish``) and reads."""

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
