"""What a command says: JSON on stdout, words on stderr, warnings kept for ``--json``.

A stdout or stderr that cannot take it (a full disk, a closed descriptor) is said
where it can be, never turned into a traceback and another exit status. A reader
that stopped reading (``runs --json | head -c 10``: a closed pipe) is not a failure:
nothing is said, and the command exits as it would have (``stdout_closed``)."""

from __future__ import annotations

import os
import sys
from typing import Any

import orjson

from flowdrop_tui.core.records.flow_state.nesting import clip


def dump(value: Any) -> str:
    try:
        return orjson.dumps(value, default=str, option=orjson.OPT_INDENT_2).decode()
    except TypeError:  # orjson's own error too: nested past what it writes (a forged record)
        return orjson.dumps(clip(value), default=str, option=orjson.OPT_INDENT_2).decode()


def err(message: str) -> None:
    try:
        print(message, file=sys.stderr, flush=True)
    except (OSError, ValueError):
        pass  # stderr full, closed or gone: the exit status still tells


def out(text: str) -> None:
    """Print ``text`` on stdout, now; a stdout that cannot take it (a full disk, a closed
    descriptor) is said on stderr, never turned into a traceback and another exit status."""
    try:
        print(text, flush=True)
    except (OSError, ValueError) as exc:
        stdout_failed(exc)


def stdout_failed(exc: Exception) -> None:
    if not isinstance(exc, BrokenPipeError):  # a reader that left asked for nothing more
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        err(f"flowdrop-tui: could not write to standard output ({reason})")
    stdout_closed()


def stdout_closed() -> None:
    """Standard output goes nowhere from now: what is still buffered, and what is said
    later, would fail again — at the interpreter's own flush at exit that is a
    traceback ("Exception ignored … BrokenPipeError") and exit status 120."""
    try:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, sys.stdout.fileno())
        os.close(null)
    except (OSError, ValueError):
        pass


class Warnings:
    """What a command warns of: printed on stderr as it happens (the core's ``notify``)
    and kept, without the ``warning:`` prefix, for its ``--json`` output's ``"warnings"``."""

    PREFIX = "warning: "

    def __init__(self) -> None:
        self.items: list[str] = []

    def __call__(self, text: str) -> None:
        err(text)
        if text.startswith(self.PREFIX):
            self.items.append(text.removeprefix(self.PREFIX))

    def add(self, text: str) -> None:
        self(self.PREFIX + text)
