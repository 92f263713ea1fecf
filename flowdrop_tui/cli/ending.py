"""How a command ends: a failure said as one line (and, with ``--json``, as
``{"error": {"code", "message"}}``), and whether the process may tear itself down.

A verb returns its exit status, or ``WithoutTeardown(status)`` when the process must
leave through ``os._exit`` once its answer is out (the UI after quitting; a worker,
which used Temporal's client). The mode says the same of itself
(``Mode.exit_without_teardown``); ``cli.main`` asks both, and nothing else does."""

from __future__ import annotations

import contextlib
import os
import sys
from typing import NamedTuple

from flowdrop_tui.cli.output import Warnings, dump, err, out, stdout_closed
from flowdrop_tui.core.errors import FlowdropError


class WithoutTeardown(NamedTuple):
    """A verb's exit status, to be left with without the interpreter's teardown."""

    code: int


def failed(exc: BaseException, as_json: bool, warnings: Warnings) -> int:
    """``exc`` — a ``FlowdropError``, ``KeyboardInterrupt`` or ``BrokenPipeError``, what
    ends a command short — said, and the exit status it ends with."""
    if isinstance(exc, FlowdropError):
        if as_json:
            extra = {"warnings": warnings.items} if warnings.items else {}
            out(dump({**exc.as_json(), **extra}))  # a closed pipe: quiet, the status kept
        err(f"flowdrop-tui: {exc.message}")
        return exc.exit_code
    if isinstance(exc, KeyboardInterrupt):
        said = str(exc)  # what became of what it interrupted, when that needs saying
        err(f"flowdrop-tui: interrupted; {said}" if said else "flowdrop-tui: interrupted")
        code = getattr(exc, "exit_code", 130)  # a start ended by SIGTERM: 143, SIGHUP: 129
        return code if isinstance(code, int) else 130
    if isinstance(exc, BrokenPipeError):
        # The reader stopped reading (``| head``) while the verb printed: what it was
        # asked is done, so 0 (never the 141 a shell shows for SIGPIPE: a script's
        # ``set -o pipefail`` would call a listing read in part a failure).
        stdout_closed()
        return 0
    raise exc


def leave(code: int) -> None:
    """Leave now, without the teardown. Remote mode's Temporal client leaves its core
    runtime's threads running, and letting the interpreter tear down under them aborts
    the process now and then (SIGSEGV/SIGABRT after the answer was printed, turning
    exit 0 into -11); the UI's reads may still be under way (docs/decisions.md,
    "Quitting the UI"). Everything is said: flushed here."""
    with contextlib.suppress(OSError, ValueError):
        sys.stdout.flush()
        sys.stderr.flush()
    os._exit(code)
