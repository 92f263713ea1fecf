"""The run child's write-through to PostgreSQL (``RemoteMirror``).

A worker starts a run as the same child process a local ``run --detach`` starts,
with ``FLOWDROP_REMOTE_RUN`` in its environment (``RunTicket``): the store, the
space, the flow key the run was launched for and the epoch its claim got.
``cli.main`` installs the mirror before anything else (``mode.install_run_mirror``);
from then on every record write of the process (``core/records/mirror.py``) is sent
to PostgreSQL before the writer returns, fenced by that key and epoch (keys the run
calls are fenced by it too: the claim is the launched key's).

- **Fenced**: one line on stderr (the run's ``output.log``), then SIGKILL to the
  process group. Nothing is written again, locally or remotely.
- **PostgreSQL unreachable**: the writer waits and the write is sent again, with
  backoff (a line on stderr now and then); nothing is skipped. Every write is safe
  to resend (whole files; appends carry their byte offset).
- **Anything else** (a bug, a conflict): the same as fenced — a record that silently
  diverged from PostgreSQL would be worse than a run that stopped.

Connections: one per thread, and one more per level of re-entry (a signal handler
that appends an event while this thread waits on PostgreSQL). No writer ever waits
on another writer's connection, so the records' own locks cannot deadlock with a
signal handler, and per-file order needs nothing here: appends carry their offset.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import socket
import stat
import sys
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import orjson

from flowdrop_tui.core.control import process
from flowdrop_tui.core.errors import UsageError
from flowdrop_tui.core.paths import (
    LIVE_LOCK,
    OUTPUT,
    RECORDS_DIR,
    REMOTE_LIVE,
    REQUESTS,
    RUN_ID_RE,
    SESSIONS,
    STATE_LOG,
)
from flowdrop_tui.core.records import mirror
from flowdrop_tui.core.records.run_record.worker_mark import WORKER_MARK
from flowdrop_tui.core.remote.daemon import lane_push
from flowdrop_tui.core.remote.postgres import shared_files
from flowdrop_tui.core.remote.postgres.store import PostgresStore
from flowdrop_tui.core.remote.remote_errors import Fenced, StoreUnreachableError

ENV_VAR = "FLOWDROP_REMOTE_RUN"
# Not in PostgreSQL: the lock is this machine's liveness (the marker, a replica's),
# requests are this machine's control files, sessions/ holds links to transcripts on
# this disk (usage is recorded as events instead); output.log is shipped by the
# worker's activity.
TICKET_FILE = "file:"  # FLOWDROP_REMOTE_RUN=file:PATH: the ticket is in PATH (read once)
TICKETS = "tickets"  # the folder of the worker's home holding run children's tickets
# The worker's own settings and secrets, never passed to a flow: remote mode's
# variables, the UI server's token, libpq's (PGPASSWORD, PGPASSFILE, PGSERVICEFILE, …).
_WORKER_ONLY = frozenset(
    {
        "FLOWDROP_POSTGRES",
        "FLOWDROP_TEMPORAL",
        "FLOWDROP_SPACE",
        "FLOWDROP_ORIGIN",
        "FLOWDROP_NAMESPACE",
        "FLOWDROP_TASK_QUEUE",
        "FLOWDROP_SERVE_TOKEN",
        ENV_VAR,
    }
)
# state.log: this machine's durability of a key set (PostgreSQL keeps the state itself);
# remote-worker.json: a replica's own note of the worker, from fd_runs
_NOT_MIRRORED = frozenset({LIVE_LOCK, REMOTE_LIVE, WORKER_MARK, REQUESTS, SESSIONS, STATE_LOG})
_BACKOFF_FIRST = 0.05
_BACKOFF_MAX = 5.0
_SAY_EVERY = 30.0  # seconds between two "still unreachable" lines


@dataclass(frozen=True)
class RunTicket:
    """What a run child needs to write through: the ``FLOWDROP_REMOTE_RUN`` value."""

    postgres: str
    space: str
    key: str
    epoch: int
    worker: str

    def env(self) -> dict[str, str]:
        """The environment entry that makes a child mirror its records, the ticket inline
        (for a hand-started child and the tests; a worker hands it over in a file)."""
        return {ENV_VAR: orjson.dumps(asdict(self)).decode()}

    def hand_over(self, folder: Path) -> dict[str, str]:
        """The ticket in a new file only this user can read (0600, in ``folder``: the
        worker's home), the variable naming it: the password is never in the child's
        environment (inherited by every process the flow starts, and readable in
        ``/proc/PID/environ`` even after it is unset) nor on its command line (``ps``).
        The child reads the file and removes it first thing (``take_ticket``)."""
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        path = folder / f"{secrets.token_hex(8)}.json"
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        fd = os.open(path, flags, 0o600)
        with os.fdopen(fd, "wb") as out:
            out.write(orjson.dumps(asdict(self)))
        return {ENV_VAR: f"{TICKET_FILE}{path}"}

    @classmethod
    def parse(cls, text: str) -> RunTicket:
        try:
            data = orjson.loads(text)
        except orjson.JSONDecodeError as exc:
            raise UsageError(f"{ENV_VAR} is not valid JSON ({exc})") from exc
        if not isinstance(data, dict):
            raise UsageError(f"{ENV_VAR} must be a JSON object, not {text[:80]!r}")
        fields = {"postgres": str, "space": str, "key": str, "epoch": int, "worker": str}
        missing = sorted(set(fields) - set(data))
        unknown = sorted(set(data) - set(fields))
        if missing or unknown:
            raise UsageError(
                f"{ENV_VAR}: missing {missing or 'nothing'}, unknown {unknown or 'nothing'}; "
                f"it holds exactly {', '.join(fields)}"
            )
        for name, kind in fields.items():
            value = data[name]
            if not isinstance(value, kind) or isinstance(value, bool) or value in ("", 0):
                raise UsageError(f"{ENV_VAR}: {name} must be a non-empty {kind.__name__}")
        return cls(**data)


def locate(path: Path) -> tuple[str, str] | None:
    """``(run_id, relpath)`` for a file inside ``.flowdrop/runs/<id>/``; None elsewhere
    (a hidden ``.new-`` folder included: its record is published whole)."""
    parts = path.parts
    for i in range(len(parts) - 3, -1, -1):
        if parts[i] == RECORDS_DIR and parts[i + 1] == "runs":
            run_id = parts[i + 2]
            rest = parts[i + 3 :]
            if RUN_ID_RE.match(run_id) and rest and rest[0] not in _NOT_MIRRORED:
                return run_id, "/".join(rest)
            return None
    return None


def record_files(run_dir: Path) -> dict[str, bytes]:
    """Every mirrored file of a record folder, by path relative to it (links skipped)."""
    files: dict[str, bytes] = {}

    def walk(folder: Path, prefix: str) -> None:
        for entry in sorted(os.scandir(folder), key=lambda e: e.name):
            name = prefix + entry.name
            if not prefix and entry.name in _NOT_MIRRORED:
                continue
            if entry.is_dir(follow_symlinks=False):
                walk(Path(entry.path), name + "/")
            elif entry.is_file(follow_symlinks=False):
                fd = os.open(entry.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
                with os.fdopen(fd, "rb") as handle:
                    files[name] = handle.read()

    walk(run_dir, "")
    return files


class RemoteMirror:
    """Sends this process's record writes to PostgreSQL, fenced (``records.mirror.Mirror``)."""

    keeps_durably = False  # records.mirror.Mirror; True once made (``__init__``)

    def __init__(
        self,
        ticket: RunTicket,
        *,
        say: Callable[[str], None] | None = None,
        die: Callable[[], None] = process.kill_own_group,
    ) -> None:
        self.ticket = ticket
        self._say = say or _say_on_stderr
        self._die = die
        self._owner = os.getpid()
        self._stores: dict[tuple[int, int], PostgresStore] = {}
        self._stores_lock = threading.Lock()
        self._depth = threading.local()
        self.host = socket.gethostname()
        self._shared_said = -_SAY_EVERY
        # PostgreSQL's commit is the durable copy of every record write (``wrote``
        # returns only once it committed, synchronous_commit being the server's), so a
        # save here need not sync first: a worker's power cut loses at most this working
        # copy, and the run is reaped and picked up from PostgreSQL (docs/remote.md,
        # "Durability"). Not in a forked copy of the run, which sends nothing (``_send``).
        self.keeps_durably = True
        ref = weakref.ref(self)
        os.register_at_fork(after_in_child=lambda: _not_durable_in(ref()))

    # --- the seam -------------------------------------------------------------------

    def wrote(self, path: Path, data: bytes) -> None:
        where = locate(path)
        if where is not None:
            run_id, relpath = where
            self._send(lambda s: s.write_file(self._key, self._epoch, run_id, relpath, data))

    def appended(self, path: Path, data: bytes, offset: int) -> None:
        where = locate(path)
        if where is not None and data:
            run_id, relpath = where
            self._send(
                lambda s: s.append_line(
                    self._key, self._epoch, run_id, relpath, data, offset=offset
                )
            )

    def published(self, run_dir: Path) -> None:
        run_id = run_dir.name
        if not RUN_ID_RE.match(run_id):
            return
        try:
            files = record_files(run_dir)
        except OSError as exc:  # the record cannot be read back: it cannot be mirrored
            self._stop(f"record {run_id} could not be read to be published ({exc})")
            return
        self._send(lambda s: s.publish(self._key, self._epoch, run_id, files))
        # Its holder at once (the worker's activity says it again once it has the pid):
        # a replica shows the run live, with the process that holds it, from the start.
        pid = os.getpid()
        self._send(
            lambda s: s.set_live(
                self._key, self._epoch, run_id, worker=self.ticket.worker, host=self.host, pid=pid
            )
        )

    # --- sending --------------------------------------------------------------------

    @property
    def _key(self) -> str:
        return self.ticket.key

    @property
    def _epoch(self) -> int:
        return self.ticket.epoch

    def _store(self, depth: int) -> PostgresStore:
        slot = (threading.get_ident(), depth)
        with self._stores_lock:
            store = self._stores.get(slot)
            if store is None:
                store = PostgresStore(self.ticket.postgres, self.ticket.space)
                self._stores[slot] = store
            return store

    def _send(self, op: Callable[[PostgresStore], Any]) -> None:
        """Deliver ``op`` before returning: retried while PostgreSQL is unreachable, the
        process ended when it must not write. A Ctrl-C (a stop now) arriving meanwhile
        is held until the write is delivered, then raised."""
        if os.getpid() != self._owner:
            return  # a forked copy of the run writes no record (nor uses our sockets)
        depth = getattr(self._depth, "value", 0)
        self._depth.value = depth + 1
        interrupted: BaseException | None = None
        delay = _BACKOFF_FIRST
        said = 0.0
        try:
            while True:
                store = self._store(depth)
                try:
                    op(store)
                    break
                except Fenced as exc:
                    self._stop(exc.message)
                    return
                except StoreUnreachableError as exc:
                    now = time.monotonic()
                    if now - said >= _SAY_EVERY:
                        said = now
                        self._say(
                            f"flowdrop-tui: {exc.message}; the run waits and retries "
                            "(no record write is skipped)"
                        )
                    time.sleep(delay)
                    delay = min(delay * 2, _BACKOFF_MAX)
                except KeyboardInterrupt as exc:
                    # The interrupted call may or may not have committed, and its
                    # connection is in an unknown state: a new one resends it.
                    interrupted = exc
                    store.close()
                except Exception as exc:
                    self._stop(f"a record write could not reach PostgreSQL ({exc})")
                    return
        finally:
            self._depth.value = depth
        if interrupted is not None:
            raise interrupted

    def _stop(self, why: str) -> None:
        """Never write again: one line on stderr, then SIGKILL to the process group."""
        with contextlib.suppress(Exception):
            self._say(f"flowdrop-tui: {why}; this run stops now")
        self._die()

    @contextlib.contextmanager
    def shared(self, name: str) -> Iterator[shared_files.Held | None]:
        """``name`` as every machine of the space has it, held against them until the
        block ends (``shared_files.held``). PostgreSQL out of reach: ``None`` — the
        run's own file serves alone (a usage limit is then waited out per run), said
        once a while on stderr; nothing about sharing it may stop the run."""
        store = PostgresStore(self.ticket.postgres, self.ticket.space)
        done = False
        try:
            with contextlib.ExitStack() as stack:
                held: shared_files.Held | None = None
                try:
                    held = stack.enter_context(shared_files.held(store, name))
                except Exception as exc:  # unreachable, refused: local only, for now
                    self._not_shared(name, exc)
                yield held
                done = True
        except Exception as exc:
            if not done:
                raise  # the block's own error
            self._not_shared(name, exc)  # the commit failed: this machine's copy stands
        finally:
            store.close()

    def _not_shared(self, name: str, exc: Exception) -> None:
        now = time.monotonic()
        if now - self._shared_said >= _SAY_EVERY:
            self._shared_said = now
            reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            with contextlib.suppress(Exception):
                self._say(f"warning: {name} not shared with the other workers now: {reason}")

    def close(self) -> None:
        with self._stores_lock:
            stores = list(self._stores.values())
            self._stores.clear()
        for store in stores:
            store.close()


def _not_durable_in(forked: RemoteMirror | None) -> None:
    if forked is not None:
        forked.keeps_durably = False


def _say_on_stderr(line: str) -> None:
    # os.write, not print: this may run inside a signal handler or under the stream's lock.
    with contextlib.suppress(OSError):
        os.write(2, (line.rstrip("\n") + "\n").encode(errors="replace"))


def install_from_env(value: str | None = None) -> RemoteMirror | None:
    """Install the mirror ``FLOWDROP_REMOTE_RUN`` asks for (None when it is not set).
    A ticket file it names (a worker's way) is read and removed, and the variable taken
    out of this process's environment, so nothing the flow starts inherits it. A ticket
    given inline (a child started by hand) stays, as before: a ``run --detach`` passes
    it on to the run it launches."""
    text = os.environ.get(ENV_VAR, "") if value is None else value
    if not text:
        return None
    if text.startswith(TICKET_FILE):
        if value is None:
            del os.environ[ENV_VAR]
        text = take_ticket(Path(text.removeprefix(TICKET_FILE)))
    remote = RemoteMirror(RunTicket.parse(text))
    mirror.install(remote)
    lane_push.install_from_env()  # a lane's run: its branch pushed at each round's end
    return remote


def take_ticket(path: Path) -> str:
    """The ticket file's text; the file removed. Refused unless it is a plain file of
    this user that no one else can read (a ticket carries the PostgreSQL password)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        raise UsageError(
            f"{ENV_VAR}: cannot read the ticket file {path} ({exc.strerror or exc}); each "
            "is read once, by the run process its worker made it for"
        ) from exc
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o077:
            raise UsageError(
                f"{ENV_VAR}: the ticket file {path} must be a file of this user that only "
                "this user can read (0600)"
            )
        with os.fdopen(os.dup(fd), "rb") as given:
            text = given.read().decode(errors="replace")
    finally:
        os.close(fd)
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
    return text


def _password(postgres: str) -> str:
    from psycopg.conninfo import conninfo_to_dict

    try:
        return str(conninfo_to_dict(postgres).get("password") or "")
    except Exception:
        return ""


def password_shown(postgres: str) -> bool:
    """Whether this process's command line (``ps``, readable by every user) holds the
    password of ``postgres``."""
    password = _password(postgres)
    try:
        cmdline = Path("/proc/self/cmdline").read_bytes().decode(errors="replace")
    except OSError:
        cmdline = "\0".join(sys.argv)
    return bool(password) and password in cmdline


def flow_env(environ: dict[str, str] | os._Environ[str], postgres: str) -> dict[str, str]:
    """The worker's environment as a run child gets it: without the worker's own
    settings and secrets (``_WORKER_ONLY``, libpq's ``PG*``) nor any variable holding
    the PostgreSQL password. The rest (PATH, HOME, an agent's API key…) is the flow's."""
    password = _password(postgres)
    return {
        name: value
        for name, value in environ.items()
        if name not in _WORKER_ONLY
        and not name.startswith("PG")
        and not (password and password in value)
    }


def ship_output(store: PostgresStore, ticket: RunTicket, run_dir: Path, offset: int) -> int:
    """Send what the run's ``output.log`` gained since byte ``offset``; the new offset.

    For the worker's activity, which calls it every ~0.5 s and once more after the
    child ended (the child's output is written by the flow and its subprocesses
    straight to the file, so no writer of ours sees it). Fenced like every write;
    raises ``Fenced`` / ``StoreUnreachableError`` for the caller to act on (resending
    from the same offset is safe)."""
    path = run_dir / OUTPUT
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        return offset
    try:
        chunk = os.pread(fd, _SHIP_MAX, offset)
        while chunk:
            store.append_line(ticket.key, ticket.epoch, run_dir.name, OUTPUT, chunk, offset=offset)
            offset += len(chunk)
            chunk = os.pread(fd, _SHIP_MAX, offset)
    finally:
        os.close(fd)
    return offset


_SHIP_MAX = 1 << 20  # one append at most: a chatty run is shipped in 1 MiB pieces


def sweep_tickets(home: Path) -> None:
    """Remove the ticket files a dead worker left in ``home`` (children it started
    and that never read theirs)."""
    with contextlib.suppress(OSError):
        for entry in os.scandir(home / TICKETS):
            with contextlib.suppress(OSError):
                os.unlink(entry.path)


def drop_ticket(env: dict[str, str]) -> None:
    """Remove a child's ticket file if the child did not (it died before reading it)."""
    value = env.get(ENV_VAR, "")
    if value.startswith(TICKET_FILE):
        with contextlib.suppress(OSError):
            os.unlink(value.removeprefix(TICKET_FILE))
