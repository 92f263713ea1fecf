"""A worker's log: what the Temporal SDK says, in the worker's own shape.

A worker's stderr is read long after, in a file (docs/remote.md, "A worker's log").
Left to itself the SDK wrote, for a 15 s Temporal outage, ~40 lines: its core's
retry warnings in terminal colours with the gRPC client's debug dump, one per
poller per retry, and a full traceback for an activity cancelled by its heartbeat
timeout — an expected event (the run is kept by its keeper task and attended
again). Here every line is plain text (no ANSI colour) starting with its UTC time,
like the worker's own (``worker.stamped``); a repeated warning is said once a
minute with the count of those held back; an expected exception (a cancel, any
``FlowdropError`` such as ``Fenced``) is one line; only an unexpected one keeps its
traceback."""

from __future__ import annotations

import asyncio
import logging
import re
import sys
import time
from typing import TextIO

import temporalio.exceptions
from temporalio.runtime import (
    LogForwardingConfig,
    LoggingConfig,
    Runtime,
    TelemetryConfig,
    TelemetryFilter,
)

from flowdrop_tui.core.errors import FlowdropError

REPEAT_EVERY = 60.0  # seconds between two lines of one kind of SDK warning
CORE_LOGGER = "temporalio.core"
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
# The gRPC client's ``Status { code: Unavailable, message: "tcp connect error",
# source: Some(tonic::transport::Error(…)) }``: its code and message say it.
# (up to the quote that ends it when it is a field's repr, else the line's end).
_STATUS = re.compile(r'Status \{ code: (\w+), message: "([^"]*)"[^\']*')
_DIGITS = re.compile(r"\d+")
EXPECTED: tuple[type[BaseException], ...] = (
    asyncio.CancelledError,
    temporalio.exceptions.CancelledError,
    FlowdropError,
)


def install(stream: TextIO | None = None) -> None:
    """Before the worker's first Temporal client: the SDK's core logs forwarded to
    Python's logging, and every ``temporalio`` record written plainly on ``stream``
    (stderr)."""
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(PlainFormatter())
    handler.addFilter(Repeats())
    sdk = logging.getLogger("temporalio")
    sdk.addHandler(handler)
    sdk.setLevel(logging.WARNING)
    sdk.propagate = False  # not also through the root's last-resort handler
    forward = LogForwardingConfig(logger=logging.getLogger(CORE_LOGGER))
    telemetry = TelemetryConfig(
        logging=LoggingConfig(
            filter=TelemetryFilter(core_level="WARN", other_level="ERROR"), forwarding=forward
        )
    )
    Runtime.set_default(Runtime(telemetry=telemetry), error_if_already_set=False)


def expected(exc: BaseException | None) -> bool:
    return isinstance(exc, EXPECTED)


class PlainFormatter(logging.Formatter):
    """``2026-12-06T10:17:25Z message``: no colour, the gRPC dump cut to its words;
    an expected exception as ``: Kind: text`` on the same line."""

    def format(self, record: logging.LogRecord) -> str:
        when = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(record.created))
        text = _STATUS.sub(r"\1: \2", _ANSI.sub("", record.getMessage()))
        lines = [f"{when} {' '.join(text.split())}"]
        exc = record.exc_info[1] if record.exc_info else None
        if exc is not None and expected(exc):
            lines[0] += f": {type(exc).__name__}: {' '.join(str(exc).split()) or 'cancelled'}"
        elif record.exc_info:
            lines.append(self.formatException(record.exc_info))
        return "\n".join(lines)


class Repeats(logging.Filter):
    """One line per kind of message (its words, numbers aside) per ``REPEAT_EVERY``;
    the next says how many were held back meanwhile."""

    def __init__(self) -> None:
        super().__init__()
        self.said: dict[str, tuple[float, int]] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info and not expected(record.exc_info[1]):
            return True  # an unexpected error is always said in full
        kind = f"{record.name} {_DIGITS.sub('#', _STATUS.sub('', record.getMessage()))}"
        now = time.monotonic()
        last, held = self.said.get(kind, (float("-inf"), 0))
        if now - last < REPEAT_EVERY:
            self.said[kind] = (last, held + 1)
            return False
        self.said[kind] = (now, 0)
        if held:
            record.msg = f"{record.getMessage()} (and {held} more like it in the last minute)"
            record.args = None
        return True
