"""The run's side of SPEC §21: opening a gate (``run.ask``), and the notices a run
sends itself — each claimed before its event is recorded, so the run, not a viewer,
sends what it does while it lives (``control.notify``: exactly once)."""

from __future__ import annotations

import secrets
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, Protocol

from flowdrop_tui.core.control import notify
from flowdrop_tui.core.paths import Layout
from flowdrop_tui.core.records.event_log import EventLog
from flowdrop_tui.core.records.run_fold import fold_run
from flowdrop_tui.core.records.run_info import Status
from flowdrop_tui.core.run.frame import Frame, PauseRun

if TYPE_CHECKING:
    from collections.abc import Callable


class Holder(Protocol):
    """What this module asks of the run executing (``execution.Execution``)."""

    layout: Layout
    run_id: str
    run_dir: Path
    key: str
    log: EventLog
    stretch: int
    notify: Callable[[str], None]

    def position(self) -> dict[str, Any]: ...


def announce(host: Holder, name: str, kind: str, message: str) -> None:
    """Send the notice ``name`` of this run if no one has (``notice_sent`` when it did);
    a mark that cannot be written is a warning, never the run's end."""
    body = notify.notice(host.run_id, host.key, name, kind, message)
    try:
        if notify.announce(host.layout, host.run_dir, name, body):
            host.log.append("notice_sent", id=body["id"], kind=kind)
    except OSError as exc:
        host.log.append(
            "warning", kind="notice", message=f"the notice {body['id']} was not sent: {exc}"
        )


def open_gate(host: Holder, frame: Frame, question: str, choices: list[str] | None) -> NoReturn:
    """Record the question and pause: ``gate_opened`` is committed (durable) and is itself
    the pause — a kill before ``paused`` still leaves the run paused on its question."""
    gate = "g" + secrets.token_hex(4)
    said = f"question: {question}" + (f" [{' / '.join(choices)}]" if choices else "")
    announce(host, f"gate-{gate}", "gate", said)
    host.log.commit(
        "gate_opened",
        gate=gate,
        question=question,
        choices=choices,
        key=frame.key,
        round=frame.round,
        position=host.position(),
    )
    host.notify(f"{said} — answer with: flowdrop-tui answer {host.run_id} ANSWER")
    raise PauseRun


def at_end(host: Holder, status: Status, result: Any, error: dict[str, Any] | None) -> None:
    """Before the run records its pause or end: the notice for it (a pause by a gate or a
    budget was announced where it happened)."""
    if status == Status.PAUSED:
        cause = fold_run(host.layout, host.run_id, host.run_dir).pause_cause
        kind = str((cause or {}).get("event") or "")
        if kind and kind not in ("gate_opened", "budget_reached"):
            announce(host, f"{kind}-{host.stretch}", kind, f"paused: {kind.replace('_', ' ')}")
    elif status == Status.FAILED:
        said = (error or {}).get("message") or "the flow failed"
        announce(host, f"failed-{host.stretch}", "failed", f"failed: {said}"[:500])
    elif status == Status.COMPLETED and notify.settings(host.layout).completed:
        announce(host, "completed", "completed", f"completed: {result!r}"[:500])
