"""A real ``flowdrop-tui serve`` process for the tests, and what it leaves behind.

Every request the tests make goes to 127.0.0.1, whatever address the server binds.
"""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import parse_qs, urlsplit


def children(pid: int) -> list[int]:
    """The live (not zombie) processes whose parent is ``pid``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # pid (comm) state ppid ...: comm may hold spaces and parentheses
        state, ppid = stat.rsplit(")", 1)[1].split()[:2]
        if int(ppid) == pid and state != "Z":
            found.append(int(entry.name))
    return found


def alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


@dataclass
class Served:
    process: subprocess.Popen[str]
    url: str  # as printed
    port: int
    token: str | None

    @property
    def base(self) -> str:
        """Where the tests connect: loopback, whatever the bind address."""
        return f"http://127.0.0.1:{self.port}"

    def ui_processes(self) -> list[int]:
        return children(self.process.pid)

    def interrupt(self, signum: int = signal.SIGINT, timeout: float = 30) -> tuple[int, str]:
        """Ctrl-C as a terminal sends it (SIGINT to the foreground process group), or
        another signal the same way; returns the exit status and the server's stderr."""
        os.killpg(self.process.pid, signum)
        code = self.process.wait(timeout=timeout)
        assert self.process.stderr is not None
        return code, self.process.stderr.read()


def _read_line(stream: object, deadline: float) -> str:
    with selectors.DefaultSelector() as selector:
        selector.register(stream, selectors.EVENT_READ)  # type: ignore[arg-type]
        if not selector.select(max(0.0, deadline - time.monotonic())):
            return ""
    return stream.readline()  # type: ignore[attr-defined, no-any-return]


@contextmanager
def serving(
    ws: Path, *args: str, env: dict[str, str] | None = None, timeout: float = 30
) -> Iterator[Served]:
    """``flowdrop-tui serve --port 0 ARGS`` in its own process group (as a shell
    starts a foreground job), until the URL is printed; stopped at the end."""
    command = [sys.executable, "-m", "flowdrop_tui", "--workspace", str(ws), "serve"]
    process = subprocess.Popen(
        [*command, "--port", "0", *args],
        cwd=ws,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **(env or {})},
        start_new_session=True,
    )
    try:
        url = _read_line(process.stdout, time.monotonic() + timeout).strip()
        if not url:
            process.kill()
            _, err = process.communicate(timeout=10)
            raise AssertionError(f"serve printed no URL (exit {process.returncode}): {err}")
        parts = urlsplit(url)
        assert parts.port is not None, url
        token = parse_qs(parts.query).get("token", [None])[0]
        yield Served(process, url, parts.port, token)
    finally:
        if process.poll() is None:
            uis = children(process.pid)
            os.killpg(process.pid, signal.SIGINT)
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
            for pid in uis:  # a failed test leaves no UI behind
                if alive(pid):
                    os.kill(pid, signal.SIGKILL)
        for stream in (process.stdout, process.stderr):
            if stream is not None:
                stream.close()
