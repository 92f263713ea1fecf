"""What the stand-in agent CLIs share (tests/fakes/bin/claude and codex).

They behave like the real CLIs as far as flowdrop-tui can tell (as verified
against Claude Code 2.1.332 and Codex 0.171.0, docs/sessions.md): the same
arguments, the transcript file in the same place and layout under the same
configurable home, the final text on stdout, exit codes, usage lines in the
transcript, reading stdin although the prompt is an argument, and what each
does on SIGINT — neither dies of it: Claude Code exits 0 printing JSON with no
answer, Codex exits 1 with no ``turn.failed``. Tests steer them through the
environment:

- ``FAKE_AGENT_ANSWER``  the final text (default: ``done: <prompt>``)
- ``FAKE_AGENT_EXIT``    exit with this code after writing the transcript
- ``FAKE_AGENT_SLEEP``   seconds to work mid-session (a slow session to stop)
- ``FAKE_AGENT_READY``   a file touched once the transcript exists and work begins
- ``FAKE_CLAUDE_FOLDER`` (claude) the project folder's name, as another release might spell it
- ``FAKE_AGENT_IGNORE_SIGINT`` ignore SIGINT (a CLI that does not stop when asked)
"""

from __future__ import annotations

import datetime as dt
import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any, TextIO


class Interrupted(Exception):
    """SIGINT arrived: the stand-in winds down the way its real CLI does."""


def _interrupted(_signum: int, _frame: Any) -> None:
    raise Interrupted


def start() -> None:
    # The real CLIs catch Ctrl-C and end their own way (see each stand-in's main).
    if os.environ.get("FAKE_AGENT_IGNORE_SIGINT"):
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    else:
        signal.signal(signal.SIGINT, _interrupted)


def read_stdin(timeout: float | None) -> str:
    """Read stdin to its end as the real CLIs do, even with the prompt as an argument:
    Codex waits for the end however long it takes; Claude Code gives up after
    about 3 s of silence (``timeout``). A terminal is not read."""
    if sys.stdin is None or sys.stdin.isatty():
        return ""
    if timeout is None:
        return sys.stdin.read()
    import select

    chunks = []
    while True:
        ready, _, _ = select.select([sys.stdin], [], [], timeout)
        if not ready:
            return "".join(chunks)
        chunk = os.read(sys.stdin.fileno(), 65536)
        if not chunk:
            return "".join(chunks)
        chunks.append(chunk.decode(errors="replace"))


def usage(n: int = 1) -> dict[str, int]:
    """The usage the stand-in's "model" reports for its n-th answer (Anthropic's split)."""
    return {"input": 1000 + n, "output": 40 + n, "cache_read": 5000 + n, "cache_write": 300 + n}


def answer(prompt: str) -> str:
    return os.environ.get("FAKE_AGENT_ANSWER") or f"done: {prompt}"


def exit_code() -> int:
    return int(os.environ.get("FAKE_AGENT_EXIT") or 0)


def work() -> None:
    """The middle of a session: maybe slow, announced through FAKE_AGENT_READY."""
    ready = os.environ.get("FAKE_AGENT_READY")
    if ready:
        Path(ready).write_text(str(os.getpid()))
    seconds = float(os.environ.get("FAKE_AGENT_SLEEP") or 0)
    if seconds:
        time.sleep(seconds)


def now_utc() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def append(stream: TextIO, record: dict[str, Any]) -> None:
    """One JSONL line, flushed at once, as the real CLIs write their transcripts."""
    stream.write(json.dumps(record) + "\n")
    stream.flush()


def fail(message: str, code: int = 1) -> None:
    print(message, file=sys.stderr)
    sys.exit(code)


def take_value(args: list[str], i: int, flag: str) -> str:
    if i + 1 >= len(args):
        fail(f"error: option '{flag}' argument missing")
    return args[i + 1]
