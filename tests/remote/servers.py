"""Real servers for the remote tests, started offline on this machine.

``PostgresServer.start()`` runs Debian's (or any) PostgreSQL from ``initdb``/``pg_ctl``
found on PATH or in ``/usr/lib/postgresql/*/bin``, in a temporary data folder on a
free port, with trust authentication, listening on every address (``*``) so a test in
its own network namespace reaches it through a veth address. As root (CI) the server
runs as the ``postgres`` user (else ``nobody``): ``initdb`` refuses root.

The fixtures in ``conftest.py`` start one server per test session (per xdist worker)
and give each test a fresh ``space`` in it, instead of a new server.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import socket
import struct
import subprocess
import tempfile
import threading
import uuid
from dataclasses import dataclass, field
from pathlib import Path

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
        sock.bind(("0.0.0.0", 0))
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
    pg_ctl: str = field(default_factory=lambda: find_pg_binary("pg_ctl"))

    @property
    def data(self) -> Path:
        return self.folder / "data"

    def url(self, host: str = "127.0.0.1") -> str:
        """A connection URL through ``host`` (another address of this machine, e.g. a
        veth address seen from a network namespace, works too)."""
        return f"postgresql://{SUPERUSER}@{host}:{self.port}/{DATABASE}"

    @classmethod
    def start(cls, *, durable: bool = False) -> PostgresServer:
        """initdb + start on a free port. ``durable=False`` (tests) turns fsync off:
        the tests are about what is committed, not about power cuts."""
        user = _server_user()
        folder = Path(tempfile.mkdtemp(prefix="flowdrop-pg-"))  # /tmp: reachable as `user`
        folder.chmod(0o755)
        if user is not None:
            os.chown(folder, user.pw_uid, user.pw_gid)
        server = cls(folder=folder, port=free_port(), log=folder / "server.log", user=user)
        try:
            server._initdb(durable)
            server._ctl("start", "-w", "-t", "60", "-l", str(server.log))
        except BaseException:
            server.stop()
            raise
        return server

    def _run(self, argv: list[str]) -> None:
        kwargs = {}
        if self.user is not None:
            kwargs = {"user": self.user.pw_uid, "group": self.user.pw_gid, "extra_groups": []}
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
            "listen_addresses": "'*'",
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
        with open(self.data / "pg_hba.conf", "a") as hba:  # a namespace's veth address too
            hba.write("host all all 0.0.0.0/0 trust\nhost all all ::/0 trust\n")

    def _ctl(self, *args: str) -> None:
        self._run([self.pg_ctl, "-D", str(self.data), *args])

    def stop(self) -> None:
        if (self.data / "postmaster.pid").exists():
            with contextlib.suppress(RuntimeError):
                self._ctl("stop", "-m", "immediate", "-w", "-t", "30")
        shutil.rmtree(self.folder, ignore_errors=True)


def new_space(prefix: str = "t") -> str:
    """A space no other test uses: tests share one server, never each other's rows."""
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


class TcpProxy:
    """A TCP forwarder on loopback that a test can cut and restore: an outage between
    a client and its server without touching the shared server (the client sees its
    connections reset and new ones refused, as when the network goes)."""

    def __init__(self, target_port: int, target_host: str = "127.0.0.1") -> None:
        self.target = (target_host, target_port)
        self.port = free_port()
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
        listener.bind(("127.0.0.1", self.port))
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
