"""Reaching the Temporal server: one ``connect`` for the client and the worker.

Kept apart from the worker daemon so a client (``temporal_executor``) imports only
this to talk to Temporal, not the worker's activities and sandbox."""

from __future__ import annotations

import re

from temporalio.client import Client

from flowdrop_tui.core.remote.remote_errors import TemporalUnreachableError

CLIENT_SETTING = "`temporal` in .flowdrop/config.toml [remote] (or FLOWDROP_TEMPORAL)"


async def connect(address: str, namespace: str, *, setting: str = CLIENT_SETTING) -> Client:
    """A client of the Temporal server (``setting``: where its address is configured,
    named in the one-line error when it cannot be reached)."""
    try:
        return await Client.connect(address, namespace=namespace)
    except Exception as exc:  # the SDK raises its own RuntimeError kinds for this
        raise TemporalUnreachableError(
            f"cannot reach the Temporal server at {address}: {connect_failure(exc)}; start "
            f"the Temporal server, or check {setting} points at it"
        ) from exc


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
