"""The records layer's one seam for remote mode: every write to a run's record,
offered to a mirror that writes it through (``core/remote/write_through.py``).

Local mode installs nothing, so each write pays one ``None`` check. With a mirror
installed the writers call it synchronously, after their own write and before they
return (a key set is not done until the mirror has it), from inside their own locks
(so one file's writes reach the mirror in the order they reached the disk):

- ``wrote(path, data)``: a file under ``.flowdrop/runs/<id>/`` replaced or created
  whole (``state.json`` by ``StateFile``; an event's side file in ``events/``);
- ``appended(path, data, offset)``: bytes appended to a run's ``cycle.jsonl`` at
  byte ``offset`` (``EventLog``; a torn write's piece as well);
- ``published(run_dir)``: a new record, built in its hidden ``.new-`` folder, renamed
  into place (``run/creation.py``); the writes made in the hidden folder are not
  offered one by one — the mirror takes the published folder whole.

A mirror never raises into a writer: it retries what it cannot send yet, and ends
the process when it must not write at all (fenced out).
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol


class Mirror(Protocol):
    def wrote(self, path: Path, data: bytes) -> None: ...

    def appended(self, path: Path, data: bytes, offset: int) -> None: ...

    def published(self, run_dir: Path) -> None: ...


_installed: Mirror | None = None


def install(mirror: Mirror | None) -> None:
    """Make ``mirror`` the process's mirror (``None``: none, local mode)."""
    global _installed
    _installed = mirror


def current() -> Mirror | None:
    """The installed mirror, or ``None`` (local mode)."""
    return _installed
