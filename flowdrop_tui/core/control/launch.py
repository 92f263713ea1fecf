"""A detached run (``run --detach``, ``resume --detach``): both ends of its handshake.

The parent starts ``python -m flowdrop_tui … --handshake-fd N`` in its own
session and process group and waits only until the run exists. The child
creates the record itself (the only writer of a run's record is the process
holding it) and reports through the pipe: the run id, or the refusal it met
before any run existed. Its output then goes to the run's ``output.log``.
"""

from __future__ import annotations

import os
import selectors
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import orjson

from flowdrop_tui.core.control.gates import wait_released
from flowdrop_tui.core.control.verbs import check_resumable
from flowdrop_tui.core.errors import FlowdropError, error_for
from flowdrop_tui.core.paths import OUTPUT, Layout, split_lane
from flowdrop_tui.core.records.log.event_log import who

# -- the parent's end ------------------------------------------------------------------


def launch_run(
    layout: Layout,
    flow_folder: Path,
    key: str,
    *,
    from_run: str | None = None,
    resume: str | None = None,
    snapshot: Path | None = None,
    fresh: bool = False,
    extra: list[str] | None = None,
) -> dict[str, Any]:
    """``run FLOW --detach``: returns ``{"run", "flow", "warnings"}`` once the run exists,
    or raises the refusal (exit code and INT-16 code included) it met before that."""
    layout.check_writable()
    lane = split_lane(key)[1]  # a lane of a flow run by its path keeps its lane (SPEC §23)
    by_path = str(flow_folder) + (f"@{lane}" if lane is not None else "")
    child = ["run", key if "/" not in key else by_path]
    if from_run:
        child += ["--from", from_run]
    if resume:
        child += ["--resume", resume]
    if snapshot:
        child += ["--snapshot", str(snapshot)]
    if fresh:
        child.append("--fresh")
    child += extra or []  # budget and drift flags (--max-…, --strict), as given
    return _answer(launch(layout, child))


def launch_answer(
    layout: Layout, run_id: str, gate: str, answer: str, *, by: dict[str, Any] | None = None
) -> dict[str, Any]:
    """``answer RUN ANSWER`` (SPEC §21): the paused run resumes in a background process
    that records ``gate_answered`` (``by``: who answered, and from where) as it starts."""
    wait_released(layout, run_id)
    given = orjson.dumps({"gate": gate, "answer": answer}).decode()
    return launch_resume(layout, run_id, by=by, extra=["--answer", given])


def launch_resume(
    layout: Layout, run_id: str, *, by: dict[str, Any] | None = None, extra: list[str] | None = None
) -> dict[str, Any]:
    """``resume RUN --detach``: the paused run continues in a background process.

    ``by`` is who asked (recorded in the run's ``resumed`` event): the asker, not
    the background process that does the resuming."""
    check_resumable(layout, run_id)
    asker = {**who(), "via": "cli", **(by or {})}
    by_arg = orjson.dumps(asker).decode()
    return _answer(launch(layout, ["resume", run_id, "--by", by_arg, *(extra or [])]))


def _answer(message: dict[str, Any]) -> dict[str, Any]:
    error = message.get("error")
    if isinstance(error, dict):
        # The refusal the detached run's process met before any run existed: the class
        # that owns its code, so the code and the exit status are the child's.
        raise error_for(str(error.get("code")), str(error.get("message")))
    return message


def launch(
    layout: Layout,
    child_args: list[str],
    *,
    timeout: float = 120.0,
    env: dict[str, str] | None = None,
) -> dict[str, Any]:
    """Start a run in its own session and process group; wait only for it to be created.

    ``env``: the child's whole environment (a remote run's: the worker's, less its
    secrets, and its ticket); None passes this process's on as it is."""
    message, child = launch_process(layout, child_args, timeout=timeout, env=env)
    # The child lives on in its own session; it is reaped by init when it ends.
    threading.Thread(target=child.wait, daemon=True).start()
    return message


def launch_process(
    layout: Layout,
    child_args: list[str],
    *,
    timeout: float = 120.0,
    env: dict[str, str] | None = None,
) -> tuple[dict[str, Any], subprocess.Popen[bytes]]:
    """``launch``, handing back the child process too: a worker watches it to its end
    (and must wait for it: it is the child's parent)."""
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
            env=env,
        )
    except OSError as exc:
        os.close(read_fd)
        os.close(write_fd)
        raise FlowdropError(f"could not start the run process: {exc}") from exc
    os.close(write_fd)
    return handshake(child, read_fd, timeout)


def handshake(
    child: subprocess.Popen[bytes], read_fd: int, timeout: float = 120.0
) -> tuple[dict[str, Any], subprocess.Popen[bytes]]:
    """The parent's end once ``child`` runs with the answer pipe's other end (and its
    output on ``child.stdout``): wait until the run exists, the child's answer; a
    child that ended first is a ``FlowdropError`` with the tail of what it said.
    ``read_fd`` is closed."""
    deadline = time.monotonic() + timeout
    assert child.stdout is not None
    output = child.stdout.fileno()
    try:
        # The child's output is drained while waiting for its answer: a child that
        # prints more than a pipe holds (64 KiB: a chatty import, a long traceback)
        # before it answers would otherwise block on its write while we block on
        # the answer, until the deadline killed it.
        answer, early_output = _read_both(read_fd, output, deadline)
    finally:
        os.close(read_fd)
    early_output += _read_until_eof(output, min(deadline, time.monotonic() + 2))
    early_output = early_output[-_OUTPUT_KEPT:]
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
    return message, child


_OUTPUT_KEPT = 64 * 1024  # of the child's early output, the tail shown when it fails


def _read_both(answer_fd: int, output_fd: int, deadline: float) -> tuple[bytes, bytes]:
    """Read the answer pipe to its end, draining the output pipe meanwhile (its tail kept)."""
    answer: list[bytes] = []
    output = bytearray()
    with selectors.DefaultSelector() as selector:
        selector.register(answer_fd, selectors.EVENT_READ)
        selector.register(output_fd, selectors.EVENT_READ)
        while True:
            remaining = deadline - time.monotonic()
            ready = selector.select(remaining) if remaining > 0 else []
            if not ready:
                break
            done = False
            for key, _ in ready:
                chunk = os.read(key.fd, 65536)
                if key.fd == output_fd:
                    if not chunk:
                        selector.unregister(output_fd)
                    output += chunk
                    del output[:-_OUTPUT_KEPT]
                elif chunk:
                    answer.append(chunk)
                else:
                    done = True
            if done:
                break
    return b"".join(answer), bytes(output)


def _read_until_eof(fd: int, deadline: float) -> bytes:
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


# -- the child's end ------------------------------------------------------------------


def report_refusal(fd: int, exc: FlowdropError) -> None:
    """The detached process met a refusal before any run existed: say so and close."""
    os.write(fd, orjson.dumps({**exc.as_json(), "exit": exc.exit_code}))
    os.close(fd)


def report_created(fd: int, run_dir: Path, run_id: str, key: str, warnings: list[str]) -> None:
    """The run exists: send its output to ``output.log`` from now on, then answer."""
    out = os.open(run_dir / OUTPUT, os.O_WRONLY | os.O_APPEND)
    os.dup2(out, 1)
    os.dup2(out, 2)
    os.close(out)
    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]
    sys.stderr.reconfigure(line_buffering=True)  # type: ignore[union-attr]
    os.write(fd, orjson.dumps({"run": run_id, "flow": key, "warnings": warnings}))
    os.close(fd)
