"""How records read on screen: short errors and one-line events."""

from __future__ import annotations

from flowdrop_tui.tui.labels import event_line, short_error


def test_load_errors_are_shortened_to_what_and_where() -> None:
    """Guards the flow table's RESUMABLE cell for flows that do not load."""
    assert short_error("flows/x/flow.py:3: SyntaxError: invalid syntax") == "SyntaxError, line 3"
    assert short_error("flows/x/flow.py:12: NameError: name 'y' is not defined") == (
        "NameError, line 12"
    )
    assert short_error("flows/x/flow.py: did not answer in 5 s (does it loop?)") == (
        "no answer in 5 s"
    )
    assert short_error("/abs/flows/x/flow.py: no @flow function (decorate …)") == (
        "no @flow function"
    )


def test_events_read_as_one_line_each() -> None:
    """Guards the event feed's wording for the events a user watches for."""
    t = "2026-08-17T01:44:55.212Z"
    created = {
        "t": t,
        "event": "created",
        "key": "n",
        "start": "thread",
        "source": "R0",
        "first_round": 41,
    }
    assert event_line(created).startswith("01:44:55.212  created ")
    assert "picked up from R0 · first round 41" in event_line(created)
    stop = {"t": t, "event": "stop_requested", "now": True, "by": {"via": "ui", "pid": 7}}
    assert event_line(stop).endswith("now · by ui (pid 7)")
    ended = {
        "t": t,
        "event": "ended",
        "outcome": "failed",
        "error": {"type": "ValueError", "message": "boom"},
    }
    assert event_line(ended).endswith("failed · ValueError: boom")
    assert "round 4 · item 3" in event_line(
        {"t": t, "event": "round_started", "key": "b", "round": 4, "index": 3}
    )
    assert event_line({"t": "junk", "event": "novel", "x": 1}).startswith("??:??:??.???  novel")


def test_codex_gate_and_notice_events_read_as_words() -> None:
    """Issue 35: a Codex session (its transcript named later) read ``→ None``; a
    question, its answer and a notice read ``gate='g…' question='…'``, ``id='…'``."""
    t = "2026-08-17T01:44:55.212Z"
    codex = {
        "t": t,
        "event": "session_opened",
        "session": "R-000001",
        "backend": "codex",
        "target": None,
    }
    assert event_line(codex).endswith("codex session R-000001")
    gate = {
        "t": t,
        "event": "gate_opened",
        "gate": "g1a2b3c4d",
        "question": "ship it?",
        "choices": ["yes", "no"],
        "key": "ship",
        "round": 3,
        "position": 0,
    }
    assert event_line(gate).endswith("gate_opened     asks 'ship it?' [yes / no] · round 3")
    answered = {"t": t, "event": "gate_answered", "gate": "g1a2b3c4d", "answer": "yes"}
    answered["by"] = {"via": "ui", "pid": 7}
    assert event_line(answered).endswith("answered 'yes' · by ui (pid 7)")
    notice = {"t": t, "event": "notice_sent", "id": "R/budget-1", "kind": "budget_reached"}
    assert event_line(notice).endswith("notice sent: budget reached")
    budget = {"t": t, "event": "budget_reached", "budget": "rounds", "limit": 5, "used": 5}
    assert event_line(budget).endswith("rounds budget reached (5 of 5 used)")
    for event in (codex, gate, answered, notice, budget):
        assert "None" not in event_line(event) and "='" not in event_line(event)
