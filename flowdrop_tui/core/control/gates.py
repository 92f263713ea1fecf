"""Answering a run's question (SPEC §21): which gate, whether the answer may be given,
and by whom. The answer itself is recorded by the process that resumes the run
(``gate_answered``, before ``resumed``): only the holder writes a record (SPEC §4)."""

from __future__ import annotations

import time
from typing import Any

from flowdrop_tui.core.control.lineage import in_run_tree
from flowdrop_tui.core.errors import (
    GateClosedError,
    GateSelfAnswerError,
    GateUnknownError,
    UsageError,
)
from flowdrop_tui.core.paths import Layout
from flowdrop_tui.core.records.run_record.liveness import live_pid
from flowdrop_tui.core.records.run_record.run_fold import load_run
from flowdrop_tui.core.records.run_record.run_info import RunInfo


def still_open(info: RunInfo, gate_id: str | None) -> dict[str, Any]:
    """The gate ``gate_id`` (else the run's open one), refused when unknown or closed."""
    if gate_id is None:
        for gate in reversed(info.gates.values()):
            if gate.get("status") == "open":
                return gate
        if not info.gates:
            raise GateUnknownError(f"run {info.run} has not asked a question")
        gate_id = list(info.gates)[-1]
    found = info.gates.get(gate_id)
    if found is None:
        known = ", ".join(info.gates) or "none"
        raise GateUnknownError(f"run {info.run} has no question {gate_id} (its questions: {known})")
    gate = found
    if gate.get("status") == "answered":
        by = gate.get("by") or {}
        raise GateClosedError(
            f"question {gate_id} of run {info.run} was already answered "
            f"{gate.get('answer')!r} by {by.get('user', '?')}@{by.get('host', '?')}"
        )
    if gate.get("status") != "open":
        raise GateClosedError(
            f"question {gate_id} of run {info.run} is closed (the run was resumed without "
            f"its answer, or ended: it is {info.status})"
        )
    return gate


def check_answer(
    layout: Layout, run_id: str, answer: str, gate_id: str | None = None
) -> dict[str, Any]:
    """The open gate ``answer`` answers, or the refusal: from the run's own process tree
    (``GATE_SELF_ANSWER``), an unknown or closed gate, an answer not among its choices."""
    info = load_run(layout, run_id)
    why = in_run_tree(run_id, info.holders)
    if why is not None:
        raise GateSelfAnswerError(
            f"run {run_id} cannot answer its own question: this answer comes from inside "
            f"its process tree ({why}); a person answers it"
        )
    gate = still_open(info, gate_id)
    choices = gate.get("choices")
    if isinstance(choices, list) and answer not in choices:
        raise UsageError(
            f"{answer!r} is not an answer to {gate.get('question')!r}: answer one of "
            + ", ".join(repr(c) for c in choices)
        )
    return gate


def wait_released(layout: Layout, run_id: str, timeout: float = 30.0) -> None:
    """Until the process that opened the gate has let the run go (it is recorded paused
    as the gate opens, and exits a moment later)."""
    deadline = time.monotonic() + timeout
    run_dir = layout.run_dir(run_id)
    while live_pid(run_dir) is not None and time.monotonic() < deadline:
        time.sleep(0.02)
