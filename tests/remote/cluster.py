"""A small cluster on one machine for the remote tests: real ``flowdrop-tui worker``
processes (each with its own HOME and home folder), a bare git origin, and client
workspaces configured for remote mode, driven through the real CLI.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from tests import waiting
from tests.remote.git_origin import commit_all, git, make_origin


def wait_for(what: str, check: Callable[[], Any], timeout: float = 60.0) -> Any:
    """``tests.waiting.wait_for`` with what is awaited named first, as servers are."""
    return waiting.wait_for(check, timeout, interval=0.2, what=what)


@dataclass
class WorkerProcess:
    """One ``flowdrop-tui worker`` in its own session (process group), like a machine."""

    worker_id: str
    home: Path
    log: Path
    process: subprocess.Popen[bytes]

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def wait_polling(self, timeout: float = 60.0) -> None:
        def polling() -> bool:
            if self.process.poll() is not None:
                raise AssertionError(f"worker {self.worker_id} exited:\n{self.text()}")
            return "polling" in self.text()

        wait_for(f"worker {self.worker_id} to poll", polling, timeout)

    def children(self) -> list[int]:
        """Pids whose parent is this worker (its run children: each in its own group)."""
        found = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            fields = stat[stat.rindex(")") + 2 :].split()
            if int(fields[1]) == self.process.pid:
                found.append(int(entry.name))
        return found

    def kill_machine(self) -> None:
        """``kill -9`` of the worker's group and of each run child's group: as if the
        machine died (a run child leads its own group, as a detached run does)."""
        groups = {self.process.pid, *self.children()}
        for group in groups:
            try:
                os.killpg(group, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.process.wait(timeout=10)

    def stop(self) -> None:
        if self.process.poll() is None:
            try:
                os.killpg(self.process.pid, signal.SIGTERM)
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.kill_machine()
            except ProcessLookupError:
                pass


@dataclass
class Cluster:
    """Servers' addresses, a task queue of its own, and the workers started on it."""

    temporal: str
    postgres: str
    root: Path
    task_queue: str = field(default_factory=lambda: f"flowdrop-t-{uuid.uuid4().hex[:8]}")
    workers: list[WorkerProcess] = field(default_factory=list)
    orphans: list[int] = field(default_factory=list)  # run children a test left parentless

    def start_worker(
        self,
        name: str,
        *,
        max_runs: int = 4,
        extra: tuple[str, ...] = (),
        env: dict[str, str] | None = None,
        postgres_flag: bool = True,
    ) -> WorkerProcess:
        """``env``: more variables for the worker; ``postgres_flag=False``: the URL
        in ``FLOWDROP_POSTGRES``, not on the command line (where ``ps`` shows it)."""
        home = self.root / f"machine-{name}"
        home.mkdir(parents=True, exist_ok=True)
        log = home / "worker.log"
        variables = {
            **os.environ,
            "HOME": str(home),
            "PYTHONUNBUFFERED": "1",
        }
        for var in ("FLOWDROP_TEMPORAL", "FLOWDROP_POSTGRES", "FLOWDROP_SPACE"):
            variables.pop(var, None)
        variables.update(env or {})
        if not postgres_flag:  # as docs/remote.md advises: --temporal stays a flag
            variables["FLOWDROP_POSTGRES"] = self.postgres
        command = [
            sys.executable,
            "-m",
            "flowdrop_tui",
            "worker",
            "--id",
            name,
            "--home",
            str(home / "flowdrop-worker"),
            "--temporal",
            self.temporal,
            *(["--postgres", self.postgres] if postgres_flag else []),
            "--task-queue",
            self.task_queue,
            "--max-runs",
            str(max_runs),
            *extra,
        ]
        with log.open("ab") as out:
            process = subprocess.Popen(
                command,
                cwd=home,
                env=variables,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        worker = WorkerProcess(name, home, log, process)
        self.workers.append(worker)
        return worker

    def stop(self) -> None:
        for worker in self.workers:
            worker.stop()
        for pid in self.orphans:  # each leads its own group, as a detached run does
            try:
                command = Path(f"/proc/{pid}/cmdline").read_bytes()
            except OSError:
                continue  # gone
            if str(self.root).encode() not in command:
                continue  # the pid went to some other process meanwhile: not ours
            try:
                os.killpg(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


READS = ("show", "runs", "flows", "logs", "snapshot")


@dataclass
class Client:
    """A client workspace (a clone of the origin) in remote mode, and its CLI."""

    ws: Path
    origin: Path

    def cli(
        self, *args: str, check: bool = True, timeout: float = 120.0
    ) -> subprocess.CompletedProcess[str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("FLOWDROP_")}
        done = subprocess.run(
            [sys.executable, "-m", "flowdrop_tui", "--workspace", str(self.ws), *args],
            cwd=self.ws,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if check and done.returncode != 0:
            raise AssertionError(f"{args} exited {done.returncode}:\n{done.stdout}{done.stderr}")
        return done

    postgres: str = ""
    space: str = ""

    def sync(self) -> None:
        """Bring the client's replica up to PostgreSQL (what the read verbs do first
        in remote mode; done here too so these tests do not depend on it)."""
        from flowdrop_tui.core.paths import Layout
        from flowdrop_tui.core.remote import replica
        from flowdrop_tui.core.remote.postgres.store import PostgresStore

        store = PostgresStore(self.postgres, self.space)
        try:
            replica.sync(Layout(self.ws), store)
        finally:
            store.close()

    def json(self, *args: str, code: int = 0) -> Any:
        if args and args[0] in READS:
            self.sync()
        done = self.cli(*args, "--json", check=False)
        assert done.returncode == code, f"{args}: {done.returncode}\n{done.stdout}{done.stderr}"
        return orjson.loads(done.stdout)

    def add_flow(self, name: str, body: str) -> str:
        folder = self.ws / "flows" / name
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "flow.py").write_text(textwrap.dedent(body).lstrip())
        return commit_all(self.ws, f"flow {name}")


def make_client(cluster: Cluster, space: str, tmp: Path) -> Client:
    """A bare origin and a clone configured for remote mode (``.flowdrop/config.toml``)."""
    origin, clone = make_origin(tmp)
    records = clone / ".flowdrop"
    records.mkdir()
    (records / "config.toml").write_text(
        "[remote]\n"
        f'temporal = "{cluster.temporal}"\n'
        f'postgres = "{cluster.postgres}"\n'
        f'task_queue = "{cluster.task_queue}"\n'
        f'space = "{space}"\n'
        f'origin = "{origin}"\n'
    )
    assert git(clone, "status", "--porcelain", "--untracked-files=no") == ""
    return Client(clone, origin, cluster.postgres, space)


# A flow whose rounds are short: it records each round in its state.
COUNTER = """
    import time
    from flowdrop_tui import flow

    @flow(resumable=True)
    def main(run):
        run.state.setdefault("rounds", [])
        for r in run.rounds():
            run.state["round"] = r
            run.state["rounds"] = [*run.state["rounds"], r]
            print(f"round {r}", flush=True)
            time.sleep(0.4)
"""


def gated(gate: Path) -> str:
    """A flow whose round N waits for the file ``gate/go-N``: the test says when each
    round ends, so a request lands while a round is in flight, every time."""
    return f"""
    import time
    from pathlib import Path
    from flowdrop_tui import flow

    GATE = Path({str(gate)!r})

    @flow(resumable=True)
    def main(run):
        for r in run.rounds():
            run.state["round"] = r
            while not (GATE / f"go-{{r}}").exists():
                time.sleep(0.05)
"""
