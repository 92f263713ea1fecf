"""Sessions with backends; each links its transcript into the run's ``sessions/`` (SPEC §9).

A session is always opened, never reopened: the conversation does not come
back on pick-up. The run's record holds a link to the backend's own transcript,
never a second copy of it.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .errors import FlowdropError
from .paths import SESSIONS

if TYPE_CHECKING:
    from .runner import Execution
    from .runtime import Frame


@dataclass
class SessionResult:
    """What a session gives back to the flow."""

    backend: str
    session: str
    exit_code: int
    text: str
    transcript: Path
    seconds: float
    interrupted: bool = False

    @property
    def ok(self) -> bool:
        return self.exit_code == 0


_NEW_FILE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | os.O_NOFOLLOW


def _claim(execution: Execution, backend: str) -> tuple[int, str, Path, Path, int]:
    """A session number whose transcript and ``sessions/`` link are both new.

    Both are created exclusively (``O_EXCL``, ``symlink``), so an entry already in
    ``sessions/`` or ``transcripts/`` — a link left there — is skipped, never written
    through. Returns the number, session id, transcript, link and the transcript's fd.
    """
    folder = execution.run_dir / SESSIONS
    folder.mkdir(exist_ok=True)
    transcripts = execution.layout.transcripts
    transcripts.mkdir(parents=True, exist_ok=True)
    first = len([p for p in os.listdir(folder) if not p.startswith(".")]) + 1
    for number in range(first, first + 1000):
        session_id = f"{execution.run_id}-{number:03d}"
        transcript = transcripts / f"{session_id}.log"
        link = folder / f"{number:03d}-{backend}.log"
        try:
            fd = os.open(transcript, _NEW_FILE, 0o644)
        except FileExistsError:
            continue
        try:
            os.symlink(transcript, link)
        except FileExistsError:
            os.close(fd)
            os.unlink(transcript)
            continue
        return number, session_id, transcript, link, fd
    raise FlowdropError(f"no free session name in {folder}")


def _command(
    execution: Execution, frame: Frame, argv: Any, options: dict[str, Any]
) -> SessionResult:
    shell = bool(options.pop("shell", False))
    if shell:
        if not isinstance(argv, str):
            raise FlowdropError("session('command', ..., shell=True) takes a command string")
        command: Any = argv
        shown = argv
    else:
        if isinstance(argv, str):
            argv = shlex.split(argv)
        if not argv or not all(isinstance(a, str | os.PathLike) for a in argv):
            raise FlowdropError("session('command', argv) takes a non-empty list of strings")
        command = [os.fspath(a) for a in argv]
        shown = shlex.join(command)
    _, session_id, transcript, link, fd = _claim(execution, "command")
    execution.log.append(
        "session_opened",
        session=session_id,
        key=frame.key,
        round=frame.open_round,
        backend="command",
        command=shown,
        link=link.relative_to(execution.run_dir).as_posix(),
        target=str(transcript),
    )
    began = time.monotonic()
    interrupted = False
    with os.fdopen(fd, "wb") as out:
        try:
            child = subprocess.Popen(
                command,
                shell=shell,
                cwd=options.pop("cwd", execution.layout.workspace),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=options.pop("env", None),
            )
        except OSError as exc:
            execution.log.append(
                "session_closed", session=session_id, exit_code=None, error=str(exc), seconds=0.0
            )
            raise FlowdropError(
                f"session could not start {shown!r}: {exc.strerror or exc}"
            ) from exc
        execution.children.add(child.pid)
        try:
            code = child.wait()
        except KeyboardInterrupt:
            interrupted = True
            try:
                code = child.wait(timeout=5)
            except subprocess.TimeoutExpired:
                child.kill()
                code = child.wait()
            raise
        finally:
            execution.children.discard(child.pid)
            seconds = round(time.monotonic() - began, 3)
            if interrupted or child.returncode is not None:
                execution.log.append(
                    "session_closed",
                    session=session_id,
                    exit_code=child.returncode,
                    seconds=seconds,
                    interrupted=interrupted,
                )
    text = transcript.read_text(errors="replace")
    return SessionResult("command", session_id, code, text, transcript, seconds, interrupted)


def open_session(
    execution: Execution, frame: Frame, backend: str, prompt_or_argv: Any, **options: Any
) -> SessionResult:
    """Open a session with ``backend``; returns its result (exit code, text, transcript)."""
    if backend == "command":
        return _command(execution, frame, prompt_or_argv, dict(options))
    raise FlowdropError(f"unknown session backend {backend!r} (available: command)")
