"""The records layer's one seam for remote mode: every write to a run's record,
offered to a mirror that writes it through (``core/remote/daemon/write_through.py``).

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

- ``whole()``: a write and the mirror's copy of it, as one. A stop now's
  ``KeyboardInterrupt`` (``interrupt``, from the run's SIGINT handler) that lands
  inside is raised at its end: raised between an event's local append and the
  mirror's, it left the line on this disk only — a gap in the mirror's
  ``cycle.jsonl`` that its readers stop at, hiding every later line.

- ``keeps_durably``: whether the mirror's copy is the durable one — a write it has
  taken survives a power cut of this machine (PostgreSQL committed it, and whoever
  picks the run up reads it from there, never from this disk). Then a whole-file save
  here need not sync before the mirror is called (``StateFile``): the local file is a
  working copy, and a write the mirror did not take was never reported saved. Its
  working copy is then the state log's record alone (``state.json`` replaced at the
  log's wrap and at the end): a rename's journal entry would ride the mirror's own
  flush when both are on one disk.

- ``shared(name)``: a workspace file every machine of the space shares
  (``limits.json``: a usage limit closes for every worker's runs), held against the
  other machines while the block runs; ``None`` when it cannot be reached now, and
  the local file serves alone.

- ``at_round_end(checkout)``: the run's main rounds each ended (and the run itself),
  its commits in ``checkout`` ready to leave the machine: on a worker a lane's branch
  is pushed to the origin then (``core/remote/daemon/lane_push.py``). Locally nothing
  is installed (``on_round_end``), so a round end pays one ``None`` check.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Protocol


class SharedFile(Protocol):
    """A shared file inside its hold: ``data`` as the space has it (``None``: none
    yet); ``write`` replaces it when the hold ends."""

    data: bytes | None

    def write(self, data: bytes) -> None: ...


class Mirror(Protocol):
    # Whether what the mirror is given is durable when its call returns (PostgreSQL's
    # commit): a key set then skips the local state log's flush (records/flow_state/state_log.py).
    keeps_durably: bool

    def wrote(self, path: Path, data: bytes) -> None: ...

    def appended(self, path: Path, data: bytes, offset: int) -> None: ...

    def published(self, run_dir: Path) -> None: ...

    def shared(self, name: str) -> contextlib.AbstractContextManager[SharedFile | None]: ...


_installed: Mirror | None = None


def install(mirror: Mirror | None) -> None:
    """Make ``mirror`` the process's mirror (``None``: none, local mode)."""
    global _installed
    _installed = mirror


def current() -> Mirror | None:
    """The installed mirror, or ``None`` (local mode)."""
    return _installed


_round_end: Callable[[Path], None] | None = None


def on_round_end(hook: Callable[[Path], None] | None) -> None:
    """Make ``hook`` what ``at_round_end`` calls (``None``: nothing, local mode)."""
    global _round_end
    _round_end = hook


def at_round_end(checkout: Path) -> None:
    """A main round of the run (or the run) ended, its work in ``checkout``: the hook
    installed for it, if any, is told. It never raises into the run."""
    hook = _round_end
    if hook is not None:
        hook(checkout)


class _Held(threading.local):
    depth = 0  # this thread's ``whole`` blocks entered (a signal handler's write nests)
    interrupted = False  # a stop now arrived inside them


_held = _Held()


@contextlib.contextmanager
def whole() -> Iterator[None]:
    """A record write and its copy to the mirror, as one: a stop now raised meanwhile
    (``interrupt``) is raised when the outermost block ends."""
    _held.depth += 1
    try:
        yield
    finally:
        _held.depth -= 1
        if _held.depth == 0 and _held.interrupted:
            _held.interrupted = False
            raise KeyboardInterrupt


def interrupt() -> None:
    """Raise ``KeyboardInterrupt`` (a stop now, from a signal handler): at once, or at
    the end of the ``whole`` write this thread is inside."""
    if _held.depth:
        _held.interrupted = True
        return
    raise KeyboardInterrupt
