"""Every git write a lane makes — ``git worktree add/remove/prune``, a branch made or
deleted, a landing — under one workspace lock (SPEC §23: no lock races).

The lock is a ``flock`` on ``.flowdrop/lanes.lock`` whose descriptor each git child
inherits: a flowdrop process killed while its git runs leaves the lock held by that
git until it exits, so the next holder never meets a git of ours still at work. A
git ``*.lock`` file met anyway (a person's git, a git killed outright) is waited out;
one still there after ``STALE_AFTER`` that no process has open (``/proc``; elsewhere:
untouched for ten minutes) is a dead holder's, removed, and the command tried again."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import re
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from flowdrop_tui.core.errors import GitError, LockTimeoutError
from flowdrop_tui.core.paths import Layout, refuse_link

LOCK_WAIT = 300.0  # another process's lane being made (a big checkout, its setup aside)
STALE_AFTER = 20.0  # a git lock held this long is looked at: git holds them for ms
GIT_TIMEOUT = 600.0  # a checkout of a big tree; a hung git is an error, not a hung run
_LOCK_FILE = re.compile(r"'([^']+\.lock)'")
_LOCKED = ("File exists", "cannot lock ref", "Unable to create", "is locked")


@contextmanager
def held(layout: Layout, wait: float = LOCK_WAIT) -> Iterator[int]:
    """Hold the workspace's lanes lock; yields its descriptor (``run`` passes it on)."""
    path = layout.lanes_lock
    layout.root.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o644)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            refuse_link(path)
        raise
    try:
        deadline = time.monotonic() + wait
        pause = 0.005
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise LockTimeoutError(
                        f"{path} was held for {wait:.0f} s by another process making or "
                        "landing a lane; try again when it is done"
                    ) from None
                time.sleep(pause)
                pause = min(pause * 2, 0.1)
        yield fd
    finally:
        os.close(fd)


def run(
    lock_fd: int | None,
    args: list[str],
    *,
    cwd: Path,
    what: str,
    check: bool = True,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """``git args`` in ``cwd`` holding the lanes lock (``lock_fd``, inherited; ``None``:
    a read that takes no lock; ``env``: more variables, e.g. a temporary index). A git
    lock file in the way is waited out, then removed when its holder is dead; any other
    failure is ``GitError`` naming ``what``."""
    env = {
        **os.environ,
        "GIT_TERMINAL_PROMPT": "0",
        "LC_ALL": "C",
        "GIT_OPTIONAL_LOCKS": "0",
        **(env or {}),
    }
    first = time.monotonic()
    pause = 0.05
    while True:
        try:
            done = subprocess.run(
                ["git", *args],
                cwd=cwd,
                env=env,
                capture_output=True,
                text=True,
                errors="replace",
                timeout=GIT_TIMEOUT,
                stdin=subprocess.DEVNULL,
                pass_fds=() if lock_fd is None else (lock_fd,),
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise GitError(f"could not {what}: git did not run ({exc})") from None
        if done.returncode == 0 or not check:
            return done
        message = (done.stderr or done.stdout).strip()
        stale = _lock_in_the_way(message, cwd)
        if stale is not None:
            if time.monotonic() - first < STALE_AFTER:
                time.sleep(pause)
                pause = min(pause * 2, 1.0)
                continue
            if _holder_dead(stale):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(stale)
                first = time.monotonic()
                continue
            raise GitError(
                f"could not {what}: {stale} is held by a running git; try again when it is done"
            )
        raise GitError(f"could not {what}: {_last_lines(message)}")


def _lock_in_the_way(message: str, cwd: Path) -> Path | None:
    if not any(word in message for word in _LOCKED):
        return None
    found = _LOCK_FILE.search(message)
    if found is None:
        return None
    path = Path(found.group(1))
    return path if path.is_absolute() else cwd / path


def _holder_dead(lock: Path) -> bool:
    """Whether no process has ``lock`` open (git keeps its lock file open while it
    holds it); without ``/proc``, whether it went untouched for ten minutes."""
    try:
        age = time.time() - os.lstat(lock).st_mtime
    except FileNotFoundError:
        return True
    proc = Path("/proc")
    if not (proc / "self" / "fd").is_dir():
        return age > 600
    target = os.path.realpath(lock)
    for pid in os.listdir(proc):
        if not pid.isdigit():
            continue
        with contextlib.suppress(OSError):
            for fd in os.listdir(proc / pid / "fd"):
                with contextlib.suppress(OSError):
                    if os.readlink(proc / pid / "fd" / fd) == target:
                        return False
    return True


def _last_lines(message: str) -> str:
    lines = [line for line in message.splitlines() if line.strip()]
    return " / ".join(lines[-3:]) or "git failed"
