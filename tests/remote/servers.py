"""Real servers for the remote tests, started offline on this machine.

``PostgresServer.start()`` runs Debian's (or any) PostgreSQL from ``initdb``/``pg_ctl``
found on PATH or in ``/usr/lib/postgresql/*/bin``, in a temporary data folder on a
free port, with trust authentication, listening on loopback only (a test in a network
namespace starts its own, on the host's veth address too: ``listen=``). As root (CI)
the server runs as the ``postgres`` user (else ``nobody``): ``initdb`` refuses root.
The postmaster is this process's child (not ``pg_ctl``'s daemon): it gets SIGKILL
when the pytest that started it dies (``PR_SET_PDEATHSIG``) and is recorded in the
pidfiles ``temporal_server.sweep_orphans`` clears at the next start.

The fixtures in ``conftest.py`` start one server per test session (per xdist worker)
and give each test a fresh ``space`` in it, instead of a new server.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import signal
import socket
import struct
import subprocess
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.remote.temporal_server import die_with_parent, forget, record, sweep_orphans

SUPERUSER = "flowdrop"
DATABASE = "postgres"


def find_pg_binary(name: str) -> str:
    """``name`` (``initdb``, ``pg_ctl``, ``postgres``) from PATH or Debian's versioned folders."""
    found = shutil.which(name)
    if found:
        return found
    candidates = sorted(
        glob.glob(f"/usr/lib/postgresql/*/bin/{name}"),
        key=lambda p: [int(x) if x.isdigit() else 0 for x in Path(p).parts[-3].split(".")],
    )
    if candidates:
        return candidates[-1]
    raise RuntimeError(
        f"PostgreSQL's {name} is not on PATH nor in /usr/lib/postgresql/*/bin; "
        "install Debian's postgresql package (.ci/run does when initdb is missing)"
    )


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _server_user() -> pwd.struct_passwd | None:
    """Who the server runs as: ourselves, or (as root) ``postgres`` / ``nobody``."""
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "nobody"):
        with contextlib.suppress(KeyError):
            return pwd.getpwnam(name)
    raise RuntimeError("running as root and no 'postgres' or 'nobody' user to run PostgreSQL as")


@dataclass
class PostgresServer:
    """One running PostgreSQL: ``url(host)`` for a client; ``stop()`` removes it all."""

    folder: Path
    port: int
    log: Path
    user: pwd.struct_passwd | None = None
    listen: tuple[str, ...] = ("127.0.0.1",)
    process: subprocess.Popen[bytes] | None = None

    @property
    def data(self) -> Path:
        return self.folder / "data"

    def url(self, host: str = "127.0.0.1") -> str:
        """A connection URL through ``host`` (another address of this machine, e.g. a
        veth address seen from a network namespace, works too)."""
        return f"postgresql://{SUPERUSER}@{host}:{self.port}/{DATABASE}"

    @classmethod
    def start(
        cls, *, durable: bool = False, listen: tuple[str, ...] = ("127.0.0.1",)
    ) -> PostgresServer:
        """initdb + start on a free port of loopback (and of each of ``listen``).
        ``durable=False`` (tests) turns fsync off: the tests are about what is
        committed, not about power cuts."""
        sweep_orphans()
        user = _server_user()
        folder = Path(tempfile.mkdtemp(prefix="flowdrop-pg-"))  # /tmp: reachable as `user`
        folder.chmod(0o755)
        if user is not None:
            os.chown(folder, user.pw_uid, user.pw_gid)
        server = cls(
            folder=folder, port=free_port(), log=folder / "server.log", user=user, listen=listen
        )
        try:
            server._initdb(durable)
            server._serve()
        except BaseException:
            server.stop()
            raise
        return server

    def _ids(self) -> dict[str, Any]:
        if self.user is None:
            return {}
        return {"user": self.user.pw_uid, "group": self.user.pw_gid, "extra_groups": []}

    def _serve(self, timeout: float = 60.0) -> None:
        """The postmaster as our child, dying with us; wait until it takes connections."""
        env = {**os.environ, "LC_ALL": "C", "LANG": "C"}
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(
                [find_pg_binary("postgres"), "-D", str(self.data)],
                cwd=self.folder,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                preexec_fn=die_with_parent,  # after the change of user: it would clear it
                **self._ids(),
            )
        record(self.process.pid)
        deadline = time.monotonic() + timeout
        while True:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    pass
                if (self.data / "postmaster.pid").exists() and "ready" in self._status():
                    return
            except OSError:
                pass
            if self.process.poll() is not None or time.monotonic() > deadline:
                text = self.log.read_text(errors="replace")[-3000:]
                raise RuntimeError(f"PostgreSQL did not start:\n{text}")
            time.sleep(0.1)

    def _status(self) -> str:
        lines = (self.data / "postmaster.pid").read_text(errors="replace").splitlines()
        return lines[7] if len(lines) > 7 else ""

    def _run(self, argv: list[str]) -> None:
        kwargs = self._ids()
        env = {**os.environ, "LC_ALL": "C", "LANG": "C"}
        done = subprocess.run(
            argv, cwd=self.folder, env=env, capture_output=True, text=True, **kwargs
        )
        if done.returncode != 0:
            log = self.log.read_text(errors="replace")[-3000:] if self.log.exists() else ""
            raise RuntimeError(
                f"{' '.join(argv)} failed ({done.returncode}):\n{done.stdout}{done.stderr}\n{log}"
            )

    def _initdb(self, durable: bool) -> None:
        initdb = find_pg_binary("initdb")
        self._run(
            [
                initdb,
                "-D",
                str(self.data),
                "-U",
                SUPERUSER,
                "--auth=trust",
                "-E",
                "UTF8",
                "--no-instructions",
                "--no-sync",
            ]
        )
        settings = {
            "listen_addresses": "'" + ",".join(self.listen) + "'",
            "port": str(self.port),
            "unix_socket_directories": "''",  # TCP only: no socket path to outgrow
            "max_connections": "200",
            "shared_buffers": "16MB",
            "fsync": "on" if durable else "off",
            "synchronous_commit": "on" if durable else "off",
            "full_page_writes": "on" if durable else "off",
            "log_min_messages": "warning",
        }
        with open(self.data / "postgresql.conf", "a") as conf:
            conf.write("\n# flowdrop tests\n")
            for name, value in settings.items():
                conf.write(f"{name} = {value}\n")
        with open(self.data / "pg_hba.conf", "a") as hba:  # a namespace's veth peer too
            hba.write("host all all 127.0.0.1/32 trust\n")
            if self.listen != ("127.0.0.1",):
                hba.write("host all all samenet trust\n")

    def stop(self) -> None:
        if self.process is not None:
            if self.process.poll() is None:
                self.process.send_signal(signal.SIGQUIT)  # immediate shutdown
                try:
                    self.process.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    self.process.kill()
                    self.process.wait(timeout=10)
            forget(self.process.pid)
            self.process = None
        shutil.rmtree(self.folder, ignore_errors=True)


def new_space(prefix: str = "t") -> str:
    """A space no other test uses: tests share one server, never each other's rows."""
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


class TcpProxy:
    """A TCP forwarder on loopback that a test can cut and restore: an outage between
    a client and its server without touching the shared server (the client sees its
    connections reset and new ones refused, as when the network goes)."""

    def __init__(
        self, target_port: int, target_host: str = "127.0.0.1", *, listen: str = "127.0.0.1"
    ) -> None:
        self.target = (target_host, target_port)
        self.listen = listen
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind((listen, 0))
            self.port = int(sock.getsockname()[1])
        self._lock = threading.Lock()
        self._sockets: list[socket.socket] = []
        self._listener: socket.socket | None = None
        self.restore()

    def url(self) -> str:
        """The server's URL through this proxy."""
        return f"postgresql://{SUPERUSER}@127.0.0.1:{self.port}/{DATABASE}"

    def restore(self) -> None:
        """Accept connections again (on the same port)."""
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((self.listen, self.port))
        listener.listen(64)
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def cut(self) -> None:
        """Refuse new connections and reset every open one."""
        with self._lock:
            listener, self._listener = self._listener, None
            sockets, self._sockets = self._sockets, []
        if listener is not None:  # shutdown wakes the thread blocked in accept()
            with contextlib.suppress(OSError):
                listener.shutdown(socket.SHUT_RDWR)
            listener.close()
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            with contextlib.suppress(OSError):
                sock.close()

    close = cut

    def connections(self) -> int:
        """How many connections go through the proxy now (after a cut: those made since)."""
        with self._lock:
            return len(self._sockets) // 2

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(self.target)
            except OSError:
                client.close()
                continue
            with self._lock:
                if self._listener is not listener:
                    client.close()
                    upstream.close()
                    return
                self._sockets += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(source: socket.socket, sink: socket.socket) -> None:
        try:
            while chunk := source.recv(65536):
                sink.sendall(chunk)
        except OSError:
            pass
        for sock in (source, sink):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
