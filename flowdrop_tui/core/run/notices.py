"""The run's side of SPEC §21: opening a gate (``run.ask``), and the notices a run
sends itself — each claimed before its event is recorded, so the run, not a viewer,
sends what it does while it lives (``control.notify``: exactly once)."""

from __future__ import annotations

import secrets
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, Protocol

from flowdrop_tui.core.control import notify
from flowdrop_tui.core.paths import CYCLE, Layout
from flowdrop_tui.core.records import mirror
from flowdrop_tui.core.records.log import event_lines
from flowdrop_tui.core.records.log.event_log import EventLog
from flowdrop_tui.core.records.run_record.run_fold import fold_run
from flowdrop_tui.core.records.run_record.run_info import Status
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
    main: Frame
    notify: Callable[[str], None]

    def position(self) -> dict[str, Any]: ...


def announce(host: Holder, name: str, kind: str, message: str) -> None:
    """Send the notice ``name`` of this run if no one has (``notice_sent`` when it did);
    a mark that cannot be written is a warning, never the run's end.

    On a worker (a mirror writes the record through to PostgreSQL) the record is the
    ledger across workers: a notice its record already says was sent is never sent
    again, and ``notice_sent`` is committed — in PostgreSQL — before the notice goes, so
    a worker that picks the run up after a loss finds it (docs/remote.md, "Notices")."""
    body = notify.notice(host.run_id, host.key, name, kind, message)
    elsewhere = mirror.current() is not None
    try:
        if elsewhere:
            if _recorded(host.run_dir, body["id"]):
                return
            notify.announce(
                host.layout,
                host.run_dir,
                name,
                body,
                record=lambda: host.log.commit("notice_sent", id=body["id"], kind=kind),
            )
        elif notify.announce(host.layout, host.run_dir, name, body):
            host.log.append("notice_sent", id=body["id"], kind=kind)
    except OSError as exc:
        host.log.append(
            "warning", kind="notice", message=f"the notice {body['id']} was not sent: {exc}"
        )


def _recorded(run_dir: Path, notice_id: str) -> bool:
    """Whether the record already holds ``notice_sent`` for ``notice_id``."""
    sent = event_lines.events_named(run_dir / CYCLE, "notice_sent")
    return any(event.get("id") == notice_id for event in sent)


class Answers:
    """SPEC §21, the answers a resumed run holds for the round that asked: each goes back
    only to the ``ask`` of its own gate — the same key and question, the same place among
    the asks of the same round of the run's flow (``in_round``: ``None`` outside one) —
    and one that no such ``ask`` took by the end of its round is closed (``gate_closed``),
    never returned to a later one."""

    def __init__(self, held: list[dict[str, Any]]) -> None:
        self.held = [dict(answer) for answer in held if isinstance(answer, dict)]
        self.asked = 0  # asks so far in the round of the run's flow in flight

    def take(self, key: str, question: str, in_round: int | None) -> tuple[bool, Any]:
        """The next ``ask``'s answer, if its gate was answered: ``(True, answer)``."""
        self.asked += 1
        for answer in self.held:
            if (  # a gate recorded before its tie was (no `ask`, `in_round`): the question
                answer.get("key") == key
                and answer.get("question") == question
                and answer.get("in_round", in_round) == in_round
                and answer.get("ask", self.asked) == self.asked
            ):
                self.held.remove(answer)
                return True, answer.get("answer")
        return False, None

    def round_begins(self, number: int) -> list[dict[str, Any]]:
        """A round of the run's flow begins: the answers no ask of this round can take."""
        self.asked = 0
        gone = [a for a in self.held if a.get("in_round", number) != number]
        self.held = [a for a in self.held if a.get("in_round", number) == number]
        return gone

    def unused(self) -> list[dict[str, Any]]:
        """The round is over (or the run): every answer still held, let go."""
        gone, self.held = self.held, []
        return gone


def close_unused(host: Holder, gone: list[dict[str, Any]], number: int | None) -> None:
    """``gate_closed`` for each answer its round ended without an ``ask`` taking."""
    for answer in gone:
        host.log.append(
            "gate_closed",
            gate=answer.get("gate"),
            key=answer.get("key"),
            round=answer.get("in_round", number),
            reason="no ask of its round took the answer",
        )


def open_gate(
    host: Holder, frame: Frame, question: str, choices: list[str] | None, *, ask: int
) -> NoReturn:
    """Record the question and pause: ``gate_opened`` is committed (durable) and is itself
    the pause — a kill before ``paused`` still leaves the run paused on its question.
    ``ask``: its place among the asks of the round (``in_round``) the answer re-runs."""
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
        ask=ask,
        in_round=host.main.open_round,
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
            said = f"paused: {kind.replace('_', ' ')}"
            error = (cause or {}).get("error")
            if kind == "same_failure" and error:
                said += f": {error}"  # what failed, in its own words (SPEC §20)
            announce(host, f"{kind}-{host.stretch}", kind, said[:500])
    elif status == Status.FAILED:
        said = (error or {}).get("message") or "the flow failed"
        announce(host, f"failed-{host.stretch}", "failed", f"failed: {said}"[:500])
    elif status == Status.COMPLETED and notify.settings(host.layout).completed:
        announce(host, "completed", "completed", f"completed: {result!r}"[:500])
