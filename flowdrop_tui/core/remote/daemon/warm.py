"""A worker's warm run process (``WarmChild``): the run child of the next start,
started ahead of it so a start does not wait for a Python process to load.

A cold start spawns ``python -m flowdrop_tui … run …`` and waits while it imports
the CLI, the engine and (in remote mode) the PostgreSQL driver: most of what a
remote start paid beyond a local one. The worker keeps one ``python -m
flowdrop_tui.warm_run`` ready instead, started as a cold child would be (its own
session, the run child's environment less what only a start knows, output and the
handshake on pipes), loaded and waiting on its stdin; ``launch`` hands it the run
and then waits on the same handshake as a cold start (``launch.handshake``). Taken,
it is replaced by a new one once the run has answered (not before: two Python
processes loading at once on a small machine slow the run being started).

A warm process that died, or was started for another environment, is not used:
the start is made cold. One that is never taken exits when the worker goes (its
stdin's end) or is killed with the worker's drain (``close``).
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import orjson

from flowdrop_tui.core.control import process
from flowdrop_tui.core.control.launch import handshake, launch_process
from flowdrop_tui.core.paths import Layout


class _Ready:
    """One warm process: its handshake's read end and the end of it it inherited."""

    def __init__(self, env: dict[str, str], cwd: Path) -> None:
        self.env = env
        self.read_fd, write_fd = os.pipe()
        self.write_fd = write_fd
        try:
            self.child = subprocess.Popen(
                [sys.executable, "-m", "flowdrop_tui.warm_run"],
                cwd=cwd,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                pass_fds=(write_fd,),
                start_new_session=True,
                env=env,
            )
        except BaseException:
            os.close(self.read_fd)
            raise
        finally:
            os.close(write_fd)

    def alive(self) -> bool:
        return self.child.poll() is None

    def discard(self) -> None:
        process.kill_group(self.child.pid)
        with contextlib.suppress(OSError):
            os.close(self.read_fd)
        for pipe in (self.child.stdin, self.child.stdout):
            with contextlib.suppress(OSError):
                if pipe is not None:
                    pipe.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.child.wait(timeout=5)


class WarmChild:
    """At most one run process kept ready for the next start (``launch``)."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self._ready: _Ready | None = None
        self._lock = threading.Lock()
        self._closed = False

    def prepare(self, env: dict[str, str]) -> None:
        """Start a warm process for the next start, with ``env`` (the run child's
        environment less what only a start knows), unless one is ready already."""
        with self._lock:
            if self._closed or (self._ready is not None and self._ready.alive()):
                return
            if self._ready is not None:
                self._ready.discard()
                self._ready = None
            self.home.mkdir(parents=True, exist_ok=True)
            with contextlib.suppress(OSError):
                self._ready = _Ready(env, self.home)

    def _take(self, base: dict[str, str]) -> _Ready | None:
        with self._lock:
            ready, self._ready = self._ready, None
        if ready is None:
            return None
        if not ready.alive() or ready.env != base:
            ready.discard()
            return None
        return ready

    def launch(
        self,
        layout: Layout,
        child_args: list[str],
        *,
        env: dict[str, str],
        base: dict[str, str],
        timeout: float = 120.0,
    ) -> tuple[dict[str, Any], subprocess.Popen[bytes]]:
        """``launch_process(layout, child_args, env=env)``, in the warm process when one
        is ready for ``base`` (the environment it was started with), else cold."""
        ready = self._take(base)
        if ready is None:
            return launch_process(layout, child_args, timeout=timeout, env=env)
        order = {
            "workspace": str(layout.workspace),
            "argv": [
                "--workspace",
                str(layout.workspace),
                *child_args,
                "--handshake-fd",
                str(ready.write_fd),
            ],
            "env": env,
        }
        stdin = ready.child.stdin
        assert stdin is not None
        try:
            stdin.write(orjson.dumps(order))
            stdin.close()
        except OSError:  # it died just now: cold, as if there had been none
            ready.discard()
            return launch_process(layout, child_args, timeout=timeout, env=env)
        return handshake(ready.child, ready.read_fd, timeout)

    def close(self) -> None:
        """No more starts: the ready process, if any, ends."""
        with self._lock:
            self._closed = True
            ready, self._ready = self._ready, None
        if ready is not None:
            ready.discard()
