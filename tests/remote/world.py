"""A remote-mode world on one machine, for the partition test and the worker kill harness.

:class:`RemoteWorld` is a client workspace (a clone of a bare origin the workers
clone from; flows are committed and pushed) configured for remote mode through the
environment (``FLOWDROP_TEMPORAL``, ``FLOWDROP_POSTGRES``, ``FLOWDROP_SPACE``,
``FLOWDROP_ORIGIN``), and real ``flowdrop-tui worker`` processes, each with its own
HOME and worker home — optionally inside a :class:`~tests.remote.netns.Netns`, where
the servers are reached at the host's veth address.

Every process a worker starts carries ``FLOWDROP_TEST_MACHINE=<token>`` in its
environment, so "the machine" of a worker (the worker, its run children in their
own sessions, their git and agent children) can be found and killed whole, the way
a machine that dies takes everything with it (:meth:`Worker.kill_machine`).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from tests import waiting
from tests.remote.git_origin import GIT_ENV, commit_all, make_origin
from tests.remote.netns import Netns

if TYPE_CHECKING:
    from flowdrop_tui.core.remote.postgres.store import PostgresStore

MACHINE_ENV = "FLOWDROP_TEST_MACHINE"


def machine_pids(token: str) -> list[int]:
    """Every live process whose environment carries ``FLOWDROP_TEST_MACHINE=token``."""
    needle = f"{MACHINE_ENV}={token}".encode()
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            environ = Path(entry.path, "environ").read_bytes()
            stat = Path(entry.path, "stat").read_text()
        except OSError:
            continue
        if needle in environ.split(b"\0") and stat.rsplit(")", 1)[1].split()[0] != "Z":
            found.append(int(entry.name))
    return found


def pid_alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def wait_until(
    predicate: Callable[[], Any], timeout: float, what: str, interval: float = 0.1
) -> Any:
    """``tests.waiting.wait_for``, its timeout and what is awaited always given."""
    return waiting.wait_for(predicate, timeout, interval, what)


@dataclass
class Worker:
    """One ``flowdrop-tui worker`` process (its own session and process group)."""

    id: str
    home: Path
    log: Path
    proc: subprocess.Popen[bytes]
    token: str
    netns: Netns | None = None

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill_group(self) -> bool:
        """SIGKILL the worker's process group (not its runs: they have their own
        sessions and are left to fencing and the heartbeat timeout). True when it
        hit a live worker."""
        if self.proc.poll() is not None:
            return False
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()
        return True

    def kill_machine(self) -> list[int]:
        """SIGKILL every process of this worker's machine, until none is left."""
        killed: list[int] = []
        deadline = time.monotonic() + 10
        while pids := machine_pids(self.token):
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
                killed.append(pid)
            if time.monotonic() > deadline:
                raise AssertionError(f"processes {pids} of machine {self.id} outlived SIGKILL")
            time.sleep(0.02)
        with contextlib.suppress(ChildProcessError):
            self.proc.wait(timeout=10)
        return killed

    def stop(self) -> None:
        """End it and everything it started: SIGTERM, then the whole machine killed."""
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=5)
        self.kill_machine()

    def output(self) -> str:
        return worker_output(self.log)


def worker_output(log: Path) -> str:
    return log.read_text(errors="replace") if log.exists() else ""


@dataclass
class RemoteWorld:
    """A client workspace in remote mode and the workers serving it."""

    root: Path
    postgres_url: Callable[[str], str]  # host address -> URL of the one PostgreSQL
    temporal_address: Callable[[str], str]  # host address -> host:port of Temporal
    space: str = field(default_factory=lambda: f"w-{uuid.uuid4().hex[:12]}")
    # A queue of its own: tests share one Temporal server, never each other's workers.
    task_queue: str = field(default_factory=lambda: f"flowdrop-w-{uuid.uuid4().hex[:8]}")
    workers: list[Worker] = field(default_factory=list)
    ready_marker: str = "polling"  # what a worker prints once it polls its queues

    def __post_init__(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        self.origin, self.client = make_origin(self.root)
        self._store: PostgresStore | None = None

    # -- the client ------------------------------------------------------------------

    def env(self, host: str = "127.0.0.1") -> dict[str, str]:
        """The client's environment: remote mode's settings, servers reached at ``host``."""
        return {
            **{k: v for k, v in os.environ.items() if not k.startswith("FLOWDROP_")},
            **GIT_ENV,
            "FLOWDROP_TEMPORAL": self.temporal_address(host),
            "FLOWDROP_POSTGRES": self.postgres_url(host),
            "FLOWDROP_SPACE": self.space,
            "FLOWDROP_TASK_QUEUE": self.task_queue,
            "FLOWDROP_ORIGIN": str(self.origin),
        }

    def write_flow(self, name: str, body: str) -> None:
        """flows/<name>/flow.py, committed and pushed (workers check out the client's
        HEAD commit from the origin)."""
        folder = self.client / "flows" / name
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "flow.py").write_text(textwrap.dedent(body).lstrip())
        commit_all(self.client, f"flow {name}")

    def argv(self, *args: str) -> list[str]:
        return [sys.executable, "-m", "flowdrop_tui", "--workspace", str(self.client), *args]

    def cli(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            self.argv(*args),
            cwd=self.client,
            env=self.env(),
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    def json(self, *args: str, timeout: float = 120) -> Any:
        done = self.cli(*args, "--json", timeout=timeout)
        assert done.returncode == 0, (args, done.returncode, done.stdout, done.stderr)
        return orjson.loads(done.stdout)

    def spawn_cli(self, *args: str) -> subprocess.Popen[str]:
        return subprocess.Popen(
            self.argv(*args),
            cwd=self.client,
            env=self.env(),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )

    def sync(self) -> None:
        """Bring the client's replica up to date (``core/remote/replica.sync``), as the
        read verbs do before reading in remote mode."""
        from flowdrop_tui.core.paths import Layout
        from flowdrop_tui.core.remote import replica

        replica.sync(Layout(self.client), self.store)

    def show(self, run_id: str) -> dict[str, Any]:
        """``show RUN --json`` on the client, over its replica synced just before."""
        self.sync()
        answer: dict[str, Any] = self.json("show", run_id)
        return answer

    @property
    def store(self) -> PostgresStore:
        """A store on this world's space, reached from the host (loopback)."""
        if self._store is None:
            from flowdrop_tui.core.remote.postgres.store import PostgresStore

            self._store = PostgresStore(self.postgres_url("127.0.0.1"), self.space)
            self._store.ensure_schema()
        return self._store

    # -- what PostgreSQL holds (read straight from its tables) ----------------------

    def sql(self, query: str, *params: Any) -> list[tuple[Any, ...]]:
        """Rows of ``query`` on a fresh connection from the host (autocommit)."""
        import psycopg

        with psycopg.connect(self.postgres_url("127.0.0.1"), autocommit=True) as conn:
            return list(conn.execute(query, params).fetchall())

    def key_epoch(self, key: str) -> int:
        rows = self.sql("SELECT epoch FROM fd_keys WHERE space = %s AND key = %s", self.space, key)
        return int(rows[0][0]) if rows else 0

    def run_row(self, run_id: str) -> dict[str, Any] | None:
        rows = self.sql(
            "SELECT run_id, key, epoch, worker, host, pid, live FROM fd_runs "
            "WHERE space = %s AND run_id = %s",
            self.space,
            run_id,
        )
        names = ("run_id", "key", "epoch", "worker", "host", "pid", "live")
        return dict(zip(names, rows[0], strict=True)) if rows else None

    def live_runs_of(self, key: str) -> list[str]:
        rows = self.sql(
            "SELECT run_id FROM fd_runs WHERE space = %s AND key = %s AND live",
            self.space,
            key,
        )
        return sorted(str(r[0]) for r in rows)

    def stored_file(self, run_id: str, relpath: str) -> bytes | None:
        """A run's file as PostgreSQL holds it: the whole write, then its appends."""
        whole = self.sql(
            "SELECT data FROM fd_files WHERE space = %s AND run_id = %s AND relpath = %s",
            self.space,
            run_id,
            relpath,
        )
        lines = self.sql(
            "SELECT data FROM fd_lines WHERE space = %s AND run_id = %s AND relpath = %s "
            "ORDER BY seq",
            self.space,
            run_id,
            relpath,
        )
        if not whole and not lines:
            return None
        return (bytes(whole[0][0]) if whole else b"") + b"".join(bytes(r[0]) for r in lines)

    def stored_state(self, run_id: str, key: str) -> dict[str, Any] | None:
        data = self.stored_file(run_id, "state.json")
        if data is None:
            return None
        value = orjson.loads(data).get(key)
        return value if isinstance(value, dict) else None

    def stored_events(self, run_id: str) -> list[dict[str, Any]]:
        """The run's ``cycle.jsonl`` events as PostgreSQL holds them (whole lines only)."""
        data = self.stored_file(run_id, "cycle.jsonl") or b""
        return [orjson.loads(line) for line in data.split(b"\n")[:-1] if line.strip()]

    def picked(self, run_id: str) -> dict[str, Any] | None:
        """The state a run logged it started from (``run.log("picked", state=…)``)."""
        for event in self.stored_events(run_id):
            if event.get("event") == "log" and event.get("message") == "picked":
                state = (event.get("fields") or {}).get("state")
                return state if isinstance(state, dict) else None
        return None

    def stored_rows(self, run_id: str) -> list[tuple[Any, ...]]:
        """Every file and line row of a run, with a digest of its bytes: what must not
        change once its writer is fenced out."""
        files = self.sql(
            "SELECT 'file', relpath, 0, md5(data) FROM fd_files WHERE space = %s AND run_id = %s",
            self.space,
            run_id,
        )
        lines = self.sql(
            "SELECT 'line', relpath, seq, md5(data) FROM fd_lines WHERE space = %s AND run_id = %s",
            self.space,
            run_id,
        )
        return sorted(files + lines)

    def last_change(self, run_id: str) -> int:
        rows = self.sql(
            "SELECT coalesce(max(id), 0) FROM fd_changes WHERE space = %s AND run_id = %s",
            self.space,
            run_id,
        )
        return int(rows[0][0])

    def changes_after(self, run_id: str, after: int) -> list[tuple[Any, ...]]:
        return self.sql(
            "SELECT id, kind, relpath, seq FROM fd_changes "
            "WHERE space = %s AND run_id = %s AND id > %s ORDER BY id",
            self.space,
            run_id,
            after,
        )

    # -- workers ---------------------------------------------------------------------

    def start_worker(
        self, worker_id: str, *, netns: Netns | None = None, wait: bool = True
    ) -> Worker:
        """A real ``flowdrop-tui worker`` with its own HOME and worker home (kept across
        restarts of the same id, as on a real machine); inside ``netns`` when given."""
        home = self.root / "workers" / worker_id
        (home / "HOME").mkdir(parents=True, exist_ok=True)
        log = home / "worker.log"
        token = f"{self.space}-{worker_id}-{uuid.uuid4().hex[:6]}"
        host = netns.host_ip if netns else "127.0.0.1"
        # The servers by flags, as on a machine of its own: no client settings in its
        # environment (its run children inherit it).
        env = {k: v for k, v in os.environ.items() if not k.startswith("FLOWDROP_")}
        env |= {"HOME": str(home / "HOME"), "PYTHONUNBUFFERED": "1", MACHINE_ENV: token}
        argv = [
            sys.executable,
            "-m",
            "flowdrop_tui",
            "worker",
            "--id",
            worker_id,
            "--home",
            str(home / "home"),
            "--temporal",
            self.temporal_address(host),
            "--postgres",
            self.postgres_url(host),
            "--task-queue",
            self.task_queue,
        ]
        if netns is not None:
            argv = netns.argv(argv)
        seen = len(worker_output(log))  # a restarted worker appends to the same log
        with log.open("ab") as out:
            proc = subprocess.Popen(
                argv,
                cwd=home,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        worker = Worker(worker_id, home, log, proc, token, netns)
        self.workers.append(worker)
        if wait:
            self.wait_ready(worker, seen)
        return worker

    def wait_ready(self, worker: Worker, seen: int = 0, timeout: float = 60) -> None:
        def ready() -> bool:
            if not worker.alive():
                raise AssertionError(f"worker {worker.id} exited: {worker.output()[-2000:]}")
            return self.ready_marker in worker.output()[seen:]

        wait_until(ready, timeout, f"worker {worker.id} to poll")

    def close(self) -> None:
        for worker in self.workers:
            with contextlib.suppress(Exception):
                worker.stop()
        if self._store is not None:
            with contextlib.suppress(Exception):
                self._store.drop_space()
            self._store.close()


@contextlib.contextmanager
def remote_world(
    root: Path, postgres_url: Callable[[str], str], temporal_address: Callable[[str], str]
) -> Iterator[RemoteWorld]:
    world = RemoteWorld(root, postgres_url, temporal_address)
    try:
        yield world
    finally:
        world.close()
