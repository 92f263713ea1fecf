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


def _next_link_name(run_dir: Path, backend: str) -> tuple[int, str]:
    folder = run_dir / SESSIONS
    folder.mkdir(exist_ok=True)
    number = len([p for p in os.listdir(folder) if not p.startswith(".")]) + 1
    return number, f"{number:03d}-{backend}"


def _link(run_dir: Path, name: str, target: Path) -> Path:
    link = run_dir / SESSIONS / name
    os.symlink(target, link)  # never followed for writing: we only ever create it
    return link


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
    number, name = _next_link_name(execution.run_dir, "command")
    session_id = f"{execution.run_id}-{number:03d}"
    transcripts = execution.layout.transcripts
    transcripts.mkdir(parents=True, exist_ok=True)
    transcript = transcripts / f"{session_id}.log"
    link = _link(execution.run_dir, f"{name}.log", transcript)
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
    with open(transcript, "wb") as out:
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
