"""SG-12 and INT-14 as pure functions, with the seeds' own examples verbatim."""

from __future__ import annotations

import copy

import pytest

from flowdrop_tui import TerminalSnapshotError, ensure_resumable, seed_next_turn

SG12_CANCELLED = {
    "status": "cancelled",
    "isComplete": True,
    "data": {"k": "v"},
    "metadata": {"m": 1},
    "threadId": "thread_1",
    "currentNodeId": "node_a",
    "iterationCount": 3,
}
SG12_CLEARED = {
    "status": None,
    "isComplete": False,
    "error": None,
    "data": {"k": "v"},
    "metadata": {"m": 1},
    "threadId": "thread_1",
    "currentNodeId": "",
    "iterationCount": 0,
    "iterator": None,
}


def test_sg12_example_cancelled_state_seeds_the_cleared_state() -> None:
    """Guards SG-12 clause 2: keep data/metadata/thread, clear outcome and position."""
    assert seed_next_turn(SG12_CANCELLED) == SG12_CLEARED


def test_seed_next_turn_does_not_modify_its_input() -> None:
    before = copy.deepcopy(SG12_CANCELLED)
    seeded = seed_next_turn(SG12_CANCELLED)
    seeded["data"]["k"] = "changed"
    assert before == SG12_CANCELLED


@pytest.mark.parametrize("status", ["completed", "failed", "cancelled", "interrupted"])
def test_every_ended_outcome_is_cleared_and_messages_are_kept(status: str) -> None:
    """Guards keeping what the thread accumulated whatever the outcome (INT-14 clause 3)."""
    snapshot = {
        "runId": "20260817T014455.212Z-9f21ab",
        "threadId": "nightly",
        "status": status,
        "isComplete": status != "interrupted",
        "error": {"message": "boom"} if status == "failed" else None,
        "data": {"rounds": 40},
        "metadata": {"round": 40},
        "messages": [{"role": "user", "content": "hi"}],
        "currentNodeId": "nightly",
        "iterationCount": 3,
        "iterator": 7,
        "custom": {"kept": True},
    }
    seeded = seed_next_turn(snapshot)
    assert seeded["status"] is None and seeded["isComplete"] is False and seeded["error"] is None
    assert (seeded["currentNodeId"], seeded["iterationCount"], seeded["iterator"]) == ("", 0, None)
    assert seeded["data"] == {"rounds": 40}
    assert seeded["messages"] == [{"role": "user", "content": "hi"}]
    assert seeded["threadId"] == "nightly" and seeded["metadata"] == {"round": 40}
    assert seeded["custom"] == {"kept": True}


def test_sg12_clause3_paused_snapshot_is_restored_untouched() -> None:
    """Guards the pause path: position included, nothing cleared, a copy returned."""
    paused = {
        "status": "paused",
        "isComplete": False,
        "data": {"done": ["a"]},
        "currentNodeId": "",
        "iterationCount": 2,
        "iterator": 2,
        "threadId": "batch",
    }
    seeded = seed_next_turn(paused)
    assert seeded == paused
    assert seeded is not paused
    seeded["data"]["done"].append("b")
    assert paused["data"] == {"done": ["a"]}


@pytest.mark.parametrize("status", ["completed", "failed", "cancelled"])
def test_int14_terminal_snapshot_is_refused_naming_it_and_its_status(status: str) -> None:
    with pytest.raises(TerminalSnapshotError) as caught:
        ensure_resumable({"status": status}, "nightly-checkpoint")
    assert "nightly-checkpoint" in str(caught.value)
    assert status in str(caught.value)
    assert caught.value.code == "PIPELINE_TERMINAL"


@pytest.mark.parametrize("status", [None, "paused", "interrupted"])
def test_non_terminal_snapshot_is_accepted(status: str | None) -> None:
    """Proves by not raising: INT-14 refuses only the three terminal statuses."""
    ensure_resumable({"status": status}, "x")


def test_int14_same_completed_checkpoint_refused_as_resume_but_continued_as_seed() -> None:
    """INT-14's example: one checkpoint, two requests, two answers."""
    checkpoint = {"status": "completed"}
    with pytest.raises(TerminalSnapshotError):
        ensure_resumable(checkpoint, "checkpoint")
    seeded = seed_next_turn(checkpoint)
    assert seeded["status"] is None and seeded["isComplete"] is False


def test_outcome_is_read_from_status_never_from_is_complete() -> None:
    """isComplete true with a non-terminal status is not refused; false with terminal is."""
    ensure_resumable({"status": "paused", "isComplete": True}, "a")
    with pytest.raises(TerminalSnapshotError):
        ensure_resumable({"status": "failed", "isComplete": False}, "b")
    assert seed_next_turn({"status": "paused", "isComplete": True})["isComplete"] is True
