"""Reaching the Temporal server: one ``connect`` for the client and the worker.

Kept apart from the worker daemon so a client (``temporal_executor``) imports only
this to talk to Temporal, not the worker's activities and sandbox.

Every call to Temporal is bounded (docs/remote.md, "When the Temporal server cannot
be reached"): a server that accepts the TCP connection and never answers held the
SDK's connect for its own 30 s (its ``connect_timeout`` bounds only the TCP
connect, not the first RPC), so ``stop`` took 33 s to say so."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable
from datetime import timedelta
from typing import TypeVar

from temporalio.client import Client

from flowdrop_tui.core.remote.remote_errors import TemporalUnreachableError

CLIENT_SETTING = "`temporal` in .flowdrop/config.toml [remote] (or FLOWDROP_TEMPORAL)"
# The connect and its first RPC (the server's system info): milliseconds on a
# server that is up, a few seconds on a loaded machine.
CONNECT_LIMIT = 8.0

T = TypeVar("T")


async def connect(address: str, namespace: str, *, setting: str = CLIENT_SETTING) -> Client:
    """A client of the Temporal server (``setting``: where its address is configured,
    named in the one-line error when it cannot be reached), within ``CONNECT_LIMIT``.

    The SDK's connect given up at the limit goes on in its core runtime until its own
    timeout; every process that uses Temporal leaves through ``os._exit``
    (``exit_without_teardown``), so it is never waited on."""
    try:
        return await asyncio.wait_for(
            Client.connect(
                address,
                namespace=namespace,
                connect_timeout=timedelta(seconds=CONNECT_LIMIT),
            ),
            CONNECT_LIMIT,
        )
    except TimeoutError as exc:
        raise TemporalUnreachableError(silent(address, CONNECT_LIMIT, setting)) from exc
    except Exception as exc:  # the SDK raises its own RuntimeError kinds for this
        raise TemporalUnreachableError(
            f"cannot reach the Temporal server at {address}: {connect_failure(exc)}; start "
            f"the Temporal server, or check {setting} points at it"
        ) from exc


async def within(
    call: Awaitable[T], limit: float, address: str, *, setting: str = CLIENT_SETTING
) -> T:
    """``call`` (an RPC to the server at ``address``, or the SDK's loop of them: an
    Update's polls are retried on the server's deadline without end) given up after
    ``limit`` seconds, as ``TemporalUnreachableError``."""
    try:
        return await asyncio.wait_for(call, limit)
    except TimeoutError as exc:
        raise TemporalUnreachableError(silent(address, limit, setting)) from exc


def silent(address: str, limit: float, setting: str = CLIENT_SETTING) -> str:
    """The words for a server that took the connection (or the request) and gave no
    answer in time."""
    return (
        f"cannot reach the Temporal server at {address}: no answer within {limit:g} s; "
        f"check that a Temporal server (not another service) listens there and is not "
        f"overloaded, or that {setting} points at it"
    )


def connect_failure(exc: BaseException) -> str:
    """The cause in a few words, not the Rust client's debug dump
    (``tonic::transport::Error(… message: "Connection refused" …)``)."""
    text = str(exc)
    found = re.search(r'message: "([^"]+)"', text)
    if found:
        return found.group(1).lower()
    lowered = text.lower()
    if "dns error" in lowered or "failed to lookup" in lowered:
        return "the host name does not resolve"
    if "timed out" in lowered or "deadline" in lowered:
        return "no answer (timed out)"
    first = text.strip().splitlines()[0] if text.strip() else type(exc).__name__
    return first if len(first) <= 200 else first[:200] + "…"
