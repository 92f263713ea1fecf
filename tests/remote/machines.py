"""Machines for the read tests: workspaces standing for different computers that share
one origin repository and one PostgreSQL space.

``WorkerChild`` starts a run as a worker's activity does — a claim for its key, the
real run child with the mirror (``FLOWDROP_REMOTE_RUN``), ``set_live``, ``output.log``
shipped every 0.2 s and once more at the end, ``clear_live`` — without Temporal, so
the read side is tested against real writes of a real child on its own.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson

from flowdrop_tui.core.remote.daemon.write_through import RunTicket, ship_output
from flowdrop_tui.core.remote.postgres.store import PostgresStore
from tests.conftest import wait_for, write_flow

GIT_ENV = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@t",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@t",
}


def plain_env() -> dict[str, str]:
    """This environment without any FLOWDROP_ setting: local mode unless told."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLOWDROP_")}
    return {**env, **GIT_ENV}


def git(cwd: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", *args], cwd=cwd, env=plain_env(), check=True, capture_output=True, text=True
    )
    return done.stdout.strip()


def make_origin(tmp_path: Path, flows: dict[str, str]) -> Path:
    """A bare repository holding ``flows/<name>/flow.py`` for each flow, one commit."""
    seed = tmp_path / "seed"
    seed.mkdir()
    git(seed, "init", "-q", "-b", "main")
    for name, body in flows.items():
        write_flow(seed, name, body)
    (seed / ".gitignore").write_text(".flowdrop/\n")
    git(seed, "add", "-A")
    git(seed, "commit", "-q", "-m", "flows")
    origin = tmp_path / "origin.git"
    git(tmp_path, "clone", "-q", "--bare", str(seed), str(origin))
    return origin


def clone(origin: Path, dest: Path) -> Path:
    git(dest.parent, "clone", "-q", str(origin), str(dest))
    return dest


class Machine:
    """A workspace on "another computer" that reads in remote mode (its own replica)."""

    def __init__(self, ws: Path, postgres: str, space: str, origin: Path) -> None:
        self.ws = ws
        self.env = {
            **plain_env(),
            "FLOWDROP_POSTGRES": postgres,
            "FLOWDROP_TEMPORAL": "127.0.0.1:9",  # not asked by the read side
            "FLOWDROP_SPACE": space,
            "FLOWDROP_ORIGIN": str(origin),
        }

    def cli(
        self, *args: str, check: int | None = 0, timeout: float = 60
    ) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [sys.executable, "-m", "flowdrop_tui", *args],
            cwd=self.ws,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if check is not None:
            assert done.returncode == check, (args, done.returncode, done.stdout, done.stderr)
        return done

    def json(self, *args: str, check: int | None = 0) -> Any:
        return orjson.loads(self.cli(*args, "--json", check=check).stdout)

    def start(self, *args: str) -> subprocess.Popen[str]:
        return subprocess.Popen(
            [sys.executable, "-m", "flowdrop_tui", *args],
            cwd=self.ws,
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )


def local_json(ws: Path, *args: str) -> Any:
    """A command's ``--json`` answer in local mode (the worker machine's own view)."""
    done = subprocess.run(
        [sys.executable, "-m", "flowdrop_tui", *args, "--json"],
        cwd=ws,
        env=plain_env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, (args, done.stdout, done.stderr)
    return orjson.loads(done.stdout)


class WorkerChild:
    """One run on a "worker" workspace, started and watched as the worker's activity does."""

    def __init__(
        self,
        ws: Path,
        postgres: str,
        space: str,
        key: str,
        args: Sequence[str] = (),
        *,
        worker: str = "w1",
        resume: str | None = None,
    ) -> None:
        self.ws = ws
        self.key = key
        self.store = PostgresStore(postgres, space)
        self.store.ensure_schema()
        self.epoch = self.store.claim(key, worker=worker)
        self.ticket = RunTicket(postgres, space, key, self.epoch, worker)
        runs = ws / ".flowdrop" / "runs"
        before = set(os.listdir(runs)) if runs.is_dir() else set()
        command = ["resume", resume] if resume else ["run", key]
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "flowdrop_tui", *command, *args],
            cwd=ws,
            env={**plain_env(), **self.ticket.env()},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        if resume:
            self.run_id = resume
        else:

            def created() -> str | None:
                new = [
                    n
                    for n in (os.listdir(runs) if runs.is_dir() else [])
                    if n not in before and not n.startswith(".")
                ]
                return new[0] if new else None

            self.run_id = str(wait_for(created))
        self.store.set_live(
            key, self.epoch, self.run_id, worker=worker, host=f"host-{worker}", pid=self.proc.pid
        )
        self._shipper = threading.Thread(target=self._ship, daemon=True)
        self._shipper.start()

    def _ship(self) -> None:
        run_dir = self.ws / ".flowdrop" / "runs" / self.run_id
        offset = 0
        while self.proc.poll() is None:
            offset = ship_output(self.store, self.ticket, run_dir, offset)
            threading.Event().wait(0.2)
        ship_output(self.store, self.ticket, run_dir, offset)
        self.store.clear_live(self.key, self.epoch, self.run_id)

    def wait(self, timeout: float = 60) -> int:
        code = self.proc.wait(timeout)
        self._shipper.join(timeout)
        return code

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, 9)
        self.wait()

    def close(self) -> None:
        self.kill()
        self.store.close()
