"""The child side of describing flows, in a process of its own so a flow that is broken,
hangs or exits at import cannot hurt the caller.

``python -m flowdrop_tui.core.flows.describe_child FILE [WORKSPACE]`` loads one flow
and prints one JSON line with its declaration or its load error.

``… --serve WORKSPACE`` describes many: it reads one request a line on stdin
(``{"id", "file"}``) and, for each, forks a child from this already-started
interpreter — the cost of starting Python and importing flowdrop_tui is paid
once, not once per flow — which loads the flow and answers through a pipe. Each
child leads its own process group and gets ``DESCRIBE_TIMEOUT`` seconds, then
the group is killed; at most ``PARALLEL`` run at once. Answers are printed as
``{"id", …}`` lines as they come. Whatever a flow prints while loading goes to
stderr, so it cannot corrupt an answer.
"""

from __future__ import annotations

import os
import selectors
import signal
import sys
import time
from pathlib import Path
from typing import Any

import orjson

from flowdrop_tui.core.errors import FlowLoadError

DESCRIBE_TIMEOUT = 5.0  # SPEC §3: a flow that does not answer in 5 s is listed as such
PARALLEL = max(2, (os.cpu_count() or 2) * 2)


def answer_for(file: Path, workspace: Path | None) -> dict[str, Any]:
    """Load the flow in this process: its declaration, or its load error, as data."""
    # Here, not at the top: the listing imports this module for its two numbers.
    from flowdrop_tui.core.flows.declaration import describe_error, load_flow

    try:
        loaded = load_flow(file, workspace)
        return {
            "ok": True,
            "function": getattr(loaded.function, "__name__", "?"),
            "resumable": loaded.declaration.resumable,
            "description": loaded.declaration.description,
            "budget": loaded.declaration.limits,
            "lanes": loaded.declaration.lanes,
        }
    except FlowLoadError as exc:
        cause = exc.__cause__
        detail = describe_error(cause, file, workspace) if cause else {"text": exc.message}
        return {"ok": False, "error": detail.get("text", exc.message), **detail}
    except BaseException as exc:  # anything else is still an answer
        return {"ok": False, "error": f"{type(exc).__name__}: {exc}"}


def _quiet_stdout() -> int:
    """Keep fd 1 for the answer; the flow's own prints go to stderr."""
    answer_fd = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return answer_fd


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["--serve"]:
        return serve(Path(args[1]) if len(args) > 1 else None)
    file = Path(args[0])
    workspace = Path(args[1]) if len(args) > 1 else None
    answer_fd = _quiet_stdout()
    os.write(answer_fd, orjson.dumps(answer_for(file, workspace), default=str) + b"\n")
    return 0


# -- the fork server ---------------------------------------------------------------------


class _Child:
    def __init__(self, request_id: Any, file: str, pid: int, fd: int) -> None:
        self.id = request_id
        self.file = file
        self.pid = pid
        self.fd = fd
        self.began = time.monotonic()
        self.out = b""


def _fork(request_id: Any, file: str, workspace: Path | None) -> _Child:
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: load one flow, answer, and leave without cleanup of ours
        try:
            os.setpgid(0, 0)  # a hang is killed with everything it started
            os.close(read_fd)
            devnull = os.open(os.devnull, os.O_RDONLY)
            os.dup2(devnull, 0)  # the requests are the server's, never a flow's
            os.close(devnull)
            answer = answer_for(Path(file), workspace)
            os.write(write_fd, orjson.dumps(answer, default=str))
        finally:
            os._exit(0)
    os.close(write_fd)
    return _Child(request_id, file, pid, read_fd)


def _parsed(out: bytes) -> dict[str, Any] | None:
    try:
        answer = orjson.loads(out)
    except orjson.JSONDecodeError:
        return None
    return answer if isinstance(answer, dict) and "ok" in answer else None


def _finish(child: _Child, answer: dict[str, Any], out_fd: int) -> None:
    os.close(child.fd)
    os.write(out_fd, orjson.dumps({**answer, "id": child.id}, default=str) + b"\n")


def serve(workspace: Path | None) -> int:
    out_fd = _quiet_stdout()
    os.environ["PYTHONDONTWRITEBYTECODE"] = "1"
    sys.dont_write_bytecode = True
    # What every child loads a flow with, imported once here before the forks: imported
    # in each child instead (``answer_for``), 50 flows paid it 50 times (bench (f)).
    import flowdrop_tui.core.flows.declaration  # noqa: F401

    pending: list[tuple[Any, str]] = []
    for line in sys.stdin.buffer:
        try:
            request = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue
        if isinstance(request, dict) and isinstance(request.get("file"), str):
            pending.append((request.get("id"), request["file"]))
    running: dict[int, _Child] = {}
    with selectors.DefaultSelector() as selector:
        while pending or running:
            while pending and len(running) < PARALLEL:
                child = _fork(*pending.pop(0), workspace)
                running[child.fd] = child
                selector.register(child.fd, selectors.EVENT_READ)
            oldest = min(child.began for child in running.values())
            wait = max(0.0, oldest + DESCRIBE_TIMEOUT - time.monotonic())
            for key, _ in selector.select(wait):
                child = running[key.fd]
                chunk = os.read(key.fd, 65536)
                if chunk:
                    child.out += chunk
                    continue
                selector.unregister(key.fd)
                del running[key.fd]
                os.waitpid(child.pid, 0)
                # No answer: it ended (exit, signal) before it answered.
                _finish(child, _parsed(child.out) or {"ok": False, "ended": True}, out_fd)
            now = time.monotonic()
            for fd, child in list(running.items()):
                if now - child.began >= DESCRIBE_TIMEOUT:
                    try:
                        os.killpg(child.pid, signal.SIGKILL)
                    except OSError:
                        os.kill(child.pid, signal.SIGKILL)
                    os.waitpid(child.pid, 0)
                    selector.unregister(fd)
                    del running[fd]
                    # It may have answered and left something behind holding the pipe.
                    answer = _parsed(child.out) or {"ok": False, "timeout": True}
                    _finish(child, answer, out_fd)
    return 0


if __name__ == "__main__":
    sys.exit(main())
