"""Stop, pause and resume from outside a run; liveness; detached launch (SPEC §10).

A request from another process is a small file in the run's ``requests/``
folder, created with ``O_EXCL`` so two requests of one kind cannot both be
pending. The run notices it between rounds (and a watcher thread notices it
within a fraction of a second), records it with who asked, and acts on it.
Only ``stop --now`` also signals: SIGINT to the run's process group, as Ctrl-C
would. Every ``os.kill`` of the project lives in this module.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from . import locks
from .errors import (
    ALREADY_PAUSED,
    INWARD_SIGNAL_ALREADY_PENDING,
    NO_ACTIVE_PAUSE,
    PIPELINE_TERMINAL,
    FlowdropError,
    SignalRefusedError,
)
from .paths import LIVE_LOCK, REQUESTS, Layout
from .records import ENDED, LIVE, RunInfo, Status, load_run, who

STOP = "stop"
STOP_NOW = "stop-now"
PAUSE = "pause"
KINDS = (STOP_NOW, STOP, PAUSE)


@dataclass(frozen=True)
class Request:
    kind: str
    by: dict[str, Any]


# -- the run's side -----------------------------------------------------------


class Inbox:
    """The requests folder as the run reads it."""

    def __init__(self, run_dir: Path) -> None:
        self.folder = run_dir / REQUESTS
        self._lock = threading.RLock()

    def take(self) -> list[Request]:
        """Consume every pending request (each is seen exactly once)."""
        taken: list[Request] = []
        with self._lock:
            for kind in KINDS:
                path = self.folder / f"{kind}.json"
                try:
                    raw = path.read_bytes()
                except OSError:
                    continue
                try:
                    data = orjson.loads(raw)
                except orjson.JSONDecodeError:
                    data = {}
                by = data.get("by") if isinstance(data, dict) else None
                taken.append(Request(kind, by if isinstance(by, dict) else {}))
                with contextlib.suppress(OSError):
                    path.unlink()
        return taken


# -- the requester's side -------------------------------------------------------


def live_pid(run_dir: Path) -> int | None:
    return locks.holder_pid(run_dir / LIVE_LOCK)


def _post(info: RunInfo, kind: str, by: dict[str, Any]) -> bool:
    """Leave a request for the run; False when one of that kind is already pending."""
    folder = info.path / REQUESTS
    folder.mkdir(exist_ok=True)
    path = folder / f"{kind}.json"
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
    except FileExistsError:
        return False
    try:
        os.write(fd, orjson.dumps({"kind": kind, "by": by}))
    finally:
        os.close(fd)
    return True


def _refuse_ended(info: RunInfo, verb: str) -> None:
    if info.status in ENDED:
        raise SignalRefusedError(
            f"cannot {verb} run {info.run}: it has ended ({info.status}); "
            f"pick it up with: flowdrop-tui run {info.key} --from {info.run}",
            PIPELINE_TERMINAL,
        )


def interrupt(pid: int) -> None:
    """SIGINT to the run's process group, as Ctrl-C would send it.

    Only when the run leads its group (detached runs always do; so does a
    foreground run started from a shell). Otherwise its group is somebody else's
    (a test runner's, a pipeline's) and only the run itself is signalled; the run
    passes the interrupt on to the sessions it started.
    """
    try:
        group = os.getpgid(pid)
        if group == pid:
            os.killpg(group, signal.SIGINT)
        else:
            os.kill(pid, signal.SIGINT)
    except ProcessLookupError:
        pass


def kill_own_group() -> None:
    """The run's last resort after its grace period: SIGKILL itself and what it started."""
    if os.getpgrp() == os.getpid():
        os.killpg(os.getpgrp(), signal.SIGKILL)
    os.kill(os.getpid(), signal.SIGKILL)


def forward_interrupt(pids: list[int]) -> None:
    for pid in pids:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGINT)


def stop(
    layout: Layout,
    run_id: str,
    *,
    now: bool = False,
    by: dict[str, Any] | None = None,
    keep_paused: bool = False,
) -> str:
    """Ask a run to stop after its round (``now``: at once). Returns what was done.

    A paused run is closed ``cancelled`` for good — unless ``keep_paused`` is set
    (the UI's escape), which refuses it: a key meant to stop a live run must never
    close a run that paused meanwhile."""
    by = {**who(), "via": "cli", **(by or {})}
    info = load_run(layout, run_id)
    _refuse_ended(info, "stop")
    if info.status == Status.PAUSED and keep_paused:
        raise SignalRefusedError(
            f"run {run_id} is paused, so it was left as it is; resume it, or close it "
            f"for good with: flowdrop-tui stop {run_id}",
            ALREADY_PAUSED,
        )
    if info.status == Status.PAUSED:
        from .runner import close_paused

        if close_paused(layout, run_id, by):
            return f"run {run_id} was paused; it is now closed cancelled"
        info = load_run(layout, run_id)  # it was resumed meanwhile: ask it like a live run
        _refuse_ended(info, "stop")
    escalate = now or info.stop_pending or (info.path / REQUESTS / f"{STOP}.json").exists()
    if escalate:
        _post(info, STOP_NOW, by)
        pid = live_pid(info.path)
        if pid is not None:
            interrupt(pid)
        return f"run {run_id} is stopping now (its round in flight is interrupted)"
    _post(info, STOP, by)
    return (
        f"run {run_id} will stop after round {info.round} "
        f"(stop again, or stop --now, to stop it at once)"
    )


def pause(layout: Layout, run_id: str, *, by: dict[str, Any] | None = None) -> str:
    """Ask a run to pause after its round; its process saves and exits."""
    by = {**who(), "via": "cli", **(by or {})}
    info = load_run(layout, run_id)
    _refuse_ended(info, "pause")
    if info.status == Status.PAUSED:
        raise SignalRefusedError(
            f"run {run_id} is already paused; resume it with: flowdrop-tui resume {run_id}",
            ALREADY_PAUSED,
        )
    if info.pause_pending or info.stop_pending or not _post(info, PAUSE, by):
        what = "a stop" if info.stop_pending else "a pause"
        raise SignalRefusedError(
            f"run {run_id} already has {what} pending; it acts on it after round {info.round}",
            INWARD_SIGNAL_ALREADY_PENDING,
        )
    return f"run {run_id} will pause after round {info.round}"


def check_resumable(layout: Layout, run_id: str) -> RunInfo:
    """Refuse (INT-16) resuming a run that is not paused."""
    info = load_run(layout, run_id)
    if info.status in ENDED:
        raise SignalRefusedError(
            f"cannot resume run {run_id}: it has ended ({info.status}) and a finished run is "
            f"never resumed; pick it up with: flowdrop-tui run {info.key} --from {run_id}",
            PIPELINE_TERMINAL,
        )
    if info.status in LIVE:
        raise SignalRefusedError(
            f"run {run_id} is not paused (it is {info.status}); only a paused run is resumed",
            NO_ACTIVE_PAUSE,
        )
    return info


# -- detached launch -------------------------------------------------------------


class LaunchRefused(FlowdropError):
    """A refusal the detached run's process met before any run existed."""

    def __init__(self, message: str, code: str, exit_code: int) -> None:
        super().__init__(message, code)
        self.exit_code = exit_code  # type: ignore[misc]


def _answer(message: dict[str, Any]) -> dict[str, Any]:
    error = message.get("error")
    if isinstance(error, dict):
        raise LaunchRefused(
            str(error.get("message")), str(error.get("code")), int(message.get("exit", 1))
        )
    return message


def launch_run(
    layout: Layout,
    flow_folder: Path,
    key: str,
    *,
    from_run: str | None = None,
    resume: str | None = None,
    snapshot: Path | None = None,
    fresh: bool = False,
) -> dict[str, Any]:
    """``run FLOW --detach``: returns ``{"run", "flow", "warnings"}`` once the run exists,
    or raises the refusal (exit code and INT-16 code included) it met before that."""
    layout.check_writable()
    child = ["run", key if "/" not in key else str(flow_folder)]
    if from_run:
        child += ["--from", from_run]
    if resume:
        child += ["--resume", resume]
    if snapshot:
        child += ["--snapshot", str(snapshot)]
    if fresh:
        child.append("--fresh")
    return _answer(launch(layout, child))


def launch_resume(
    layout: Layout, run_id: str, *, by: dict[str, Any] | None = None
) -> dict[str, Any]:
    """``resume RUN --detach``: the paused run continues in a background process.

    ``by`` is who asked (recorded in the run's ``resumed`` event): the asker, not
    the background process that does the resuming."""
    check_resumable(layout, run_id)
    asker = {**who(), "via": "cli", **(by or {})}
    return _answer(launch(layout, ["resume", run_id, "--by", orjson.dumps(asker).decode()]))


def launch(layout: Layout, child_args: list[str], *, timeout: float = 120.0) -> dict[str, Any]:
    """Start a run in its own session and process group; wait only for it to be created.

    The child creates the record itself (the only writer of a run's record is the
    process holding it) and reports through a pipe: the run id, or the refusal
    it met before any run existed. Its output goes to the run's ``output.log``.
    """
    read_fd, write_fd = os.pipe()
    command = [
        sys.executable,
        "-m",
        "flowdrop_tui",
        "--workspace",
        str(layout.workspace),
        *child_args,
        "--handshake-fd",
        str(write_fd),
    ]
    try:
        child = subprocess.Popen(
            command,
            cwd=layout.workspace,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            pass_fds=(write_fd,),
            start_new_session=True,
        )
    except OSError as exc:
        os.close(read_fd)
        os.close(write_fd)
        raise FlowdropError(f"could not start the run process: {exc}") from exc
    os.close(write_fd)
    deadline = time.monotonic() + timeout
    try:
        answer = _read_until_eof(read_fd, deadline)
    finally:
        os.close(read_fd)
    early_output = b""
    if child.stdout is not None:
        early_output = _read_until_eof(child.stdout.fileno(), min(deadline, time.monotonic() + 2))
        child.stdout.close()
    try:
        message = orjson.loads(answer) if answer.strip() else None
    except orjson.JSONDecodeError:
        message = None
    if not isinstance(message, dict):
        if child.poll() is None and time.monotonic() >= deadline:
            child.kill()
        child.wait(timeout=5)
        tail = early_output.decode(errors="replace").strip()[-2000:]
        raise FlowdropError(
            "the run process ended before the run was created"
            + (f":\n{tail}" if tail else f" (exit status {child.returncode})")
        )
    # The child lives on in its own session; it is reaped by init when it ends.
    threading.Thread(target=child.wait, daemon=True).start()
    return message


def _read_until_eof(fd: int, deadline: float) -> bytes:
    import selectors

    chunks: list[bytes] = []
    with selectors.DefaultSelector() as selector:
        selector.register(fd, selectors.EVENT_READ)
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not selector.select(remaining):
                break
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            chunks.append(chunk)
    return b"".join(chunks)
