"""How the faces word the core's data (``format.py``): the words a user reads in the
CLI and the UI, fixed here so a change to them is a decision, not an accident."""

from __future__ import annotations

import pytest

from flowdrop_tui import format as words
from flowdrop_tui.core.control.verbs import Action, Asked

RUN = "20260817T010000.000Z-aaaaaa"


@pytest.mark.parametrize(
    ("first", "last", "said"), [(1, 3, "1–3"), (4, 6, "4–6"), (7, 7, "7"), (1, None, "—")]
)
def test_a_rounds_range(first: int, last: int | None, said: str) -> None:
    """Guards "rounds 1–3 then 4–6": an en dash, one number for one round, a dash for none."""
    assert words.rounds_range(first, last) == said


@pytest.mark.parametrize(
    ("seconds", "said"), [(None, ""), (-3, "0s"), (12.9, "12s"), (185, "3m05s"), (3720, "1h02m")]
)
def test_a_duration(seconds: float | None, said: str) -> None:
    assert words.duration(seconds) == said


def test_run_times_leave_out_what_is_unknown() -> None:
    assert words.run_times(24, 32) == "running 24s · wall 32s"
    assert words.run_times(None, 32) == "wall 32s"


def test_how_a_run_started() -> None:
    """Guards the pick-up words the run list and the launch notice share."""
    assert words.start_words("thread", RUN) == f"picked up from {RUN}"
    assert words.start_words("from", RUN) == f"picked up from {RUN}"
    assert words.start_words("snapshot", None, "snap.json") == "started from snapshot snap.json"
    assert words.start_words("fresh", None) == "fresh"


def test_statuses_and_round_labels() -> None:
    assert words.status_label(None) == "never run"
    assert words.status_label("pending") == "not started"
    assert words.status_label("cancelled") == "cancelled"
    assert words.round_label(0) == "no rounds yet"
    assert words.round_label(5) == "round 5"


def test_what_a_stop_or_pause_did() -> None:
    """Guards the sentence after ``stop``/``pause``: each action says what happens next."""
    said = {action: words.asked_text(Asked(RUN, "k", action, 3)) for action in Action}
    assert said[Action.STOP_AFTER_ROUND].startswith(f"run {RUN} will stop after round 3")
    assert "stopping now" in said[Action.STOP_NOW]
    assert said[Action.PAUSE_AFTER_ROUND] == f"run {RUN} will pause after round 3"
    assert said[Action.CLOSED].endswith("it is now closed cancelled")


def test_an_error_with_its_place() -> None:
    error = {"type": "KeyError", "message": "'x'", "file": "flows/a/flow.py", "line": 4}
    assert words.error_words(error) == "KeyError: 'x' at flows/a/flow.py:4"
    assert words.error_words(error, place=False) == "KeyError: 'x'"
    assert words.error_words("plain") == "plain"


def test_the_runs_table_names_its_columns_and_ranges() -> None:
    rows = [
        {"run": RUN, "flow": "k", "status": "cancelled", "first_round": 4, "last_round": 6},
    ]
    lines = words.runs_table(rows).splitlines()
    assert lines[0].split() == [
        "RUN",
        "FLOW",
        "STATUS",
        "ROUNDS",
        "STARTED",
        "DURATION",
        "PICKED",
        "UP",
        "FROM",
    ]
    assert lines[1].split()[:4] == [RUN, "k", "cancelled", "4–6"]


def test_an_empty_run_pane_says_how_to_run_the_flow_or_where_it_ran() -> None:
    """Guards the empty Run pane: a flow never run says enter runs it; one that ran only
    when another flow called it (its row says `completed`, its key's last run is the
    caller's) says so instead of "no runs yet"; one that cannot load says why."""
    assert words.no_runs_words("lint", None) == "no runs of lint yet — enter runs it"
    called = words.no_runs_words("lint", None, "caller", RUN)
    assert called == (
        f"lint has run only when caller called it (last in run {RUN}) — enter runs it on its own"
    )
    unknown = words.no_runs_words("lint", None, None, RUN)
    assert unknown.startswith("lint has run only when another flow called it")
    broken = words.no_runs_words("lint", "SyntaxError: bad", "caller", RUN)
    assert broken.startswith("lint cannot be loaded, so it cannot run: SyntaxError: bad")
