"""What the stand-in agent CLIs share (tests/fakes/bin/claude and codex).

They behave like the real CLIs as far as flowdrop-tui can tell: the same
arguments, the transcript file in the same place and layout under the same
configurable home, the final text on stdout, exit codes, and death by SIGINT.
Tests steer them through the environment:

- ``FAKE_AGENT_ANSWER``  the final text (default: ``done: <prompt>``)
- ``FAKE_AGENT_EXIT``    exit with this code after writing the transcript
- ``FAKE_AGENT_SLEEP``   seconds to work mid-session (a slow session to stop)
- ``FAKE_AGENT_READY``   a file touched once the transcript exists and work begins
- ``FAKE_CLAUDE_FOLDER`` (claude) the project folder's name, as another release might spell it
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


def start() -> None:
    # A real CLI dies on Ctrl-C; so does the stand-in, by the signal itself.
    signal.signal(signal.SIGINT, signal.SIG_DFL)


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
