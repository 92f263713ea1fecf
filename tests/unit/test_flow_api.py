"""The flow API a flow author writes against (``@flow``, ``run.rounds``, ``run.state``,
the return value), run in this process through the CLI's ``main`` — the same code the
command runs, without starting it as a child. (Whether a flow is resumable is still read
by describing it in a child, as every start does; that child is cached per flow.)

The same through the real command, in a child process: tests/core/test_picking_up.py,
tests/core/test_stop_pause_resume.py."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest

from flowdrop_tui.cli import main
from tests.conftest import events, state_of

COUNTER = """
    from flowdrop_tui import flow

    @flow(resumable=True, description="counts")
    def main(run):
        for _ in run.rounds(range(3)):
            run.state["n"] = run.state.get("n", 0) + 1
        return run.state["n"]
"""

ITEMS = """
    from flowdrop_tui import flow

    @flow()
    def main(run):
        seen = []
        for item in run.rounds(["a", "b", "c"]):
            seen.append(item)
            run.state["seen"] = seen  # set again each round: saved as it is written
        return "".join(seen)
"""

EMPTIES = """
    from flowdrop_tui import flow

    @flow(resumable=True)
    def main(run):
        for _ in run.rounds(range(1)):
            if run.state.get("n", 0) >= 2:
                run.state.clear()  # SPEC §5.5: the next run starts clean
            else:
                run.state["n"] = run.state.get("n", 0) + 1
"""

FAILS = """
    from flowdrop_tui import flow

    @flow(resumable=True)
    def main(run):
        for _ in run.rounds(range(3)):
            run.state["before"] = True
            raise ValueError("boom in round")
"""


@pytest.fixture
def run_here(
    workspace: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> Callable[..., tuple[int, dict[str, Any], str]]:
    """``flowdrop-tui run FLOW --json …`` in this process: exit code, answer, words."""
    monkeypatch.chdir(workspace)

    def run(*args: str) -> tuple[int, dict[str, Any], str]:
        code = main(["run", *args, "--json"])
        out, err = capsys.readouterr()
        return code, orjson.loads(out), err

    return run


def test_a_counter_run_twice_says_rounds_1_to_3_then_4_to_6(
    workspace: Path, flow_writer: Callable[[str, str], Path], run_here: Callable[..., Any]
) -> None:
    """Guards the plain loop: the second run picks up the first's state and its rounds
    go on, said in the same words as the command says them."""
    flow_writer("counter", COUNTER)
    code, first, said = run_here("counter")
    assert code == 0 and (first["first_round"], first["last_round"]) == (1, 3)
    assert f"run {first['run']} completed (rounds 1–3)" in said
    code, second, said = run_here("counter")
    assert code == 0 and (second["first_round"], second["last_round"]) == (4, 6)
    assert second["picked_up_from"] == first["run"] and second["start"] == "thread"
    assert f"run {second['run']} completed (rounds 4–6)" in said
    assert second["result"] == 6
    assert state_of(workspace, second["run"]) == {"counter": {"n": 6}}


def test_the_record_names_the_source_and_fresh_starts_a_new_chain(
    workspace: Path, flow_writer: Callable[[str, str], Path], run_here: Callable[..., Any]
) -> None:
    """Guards the chain's record: a picked-up run's ``created`` names its source, and
    ``--fresh`` starts a new chain (round 1, no source, the count from nothing)."""
    flow_writer("counter", COUNTER)
    _, first, _ = run_here("counter")
    _, second, _ = run_here("counter")
    created = [e for e in events(workspace, second["run"]) if e["event"] == "created"]
    assert created[0]["source"] == first["run"]
    _, fresh, _ = run_here("counter", "--fresh")
    assert (fresh["first_round"], fresh["picked_up_from"], fresh["result"]) == (1, None, 3)


def test_rounds_over_items_yields_each_in_turn_and_the_return_is_the_result(
    workspace: Path, flow_writer: Callable[[str, str], Path], run_here: Callable[..., Any]
) -> None:
    """Guards ``run.rounds(items)``: one round per item, in order; the flow's return
    value is the run's result; a flow without ``resumable`` starts fresh each time."""
    flow_writer("items", ITEMS)
    _, first, _ = run_here("items")
    assert (first["rounds"], first["result"]) == (3, "abc")
    started = [e["index"] for e in events(workspace, first["run"]) if e["event"] == "round_started"]
    assert started == [0, 1, 2]
    assert state_of(workspace, first["run"]) == {"items": {"seen": ["a", "b", "c"]}}
    _, again, _ = run_here("items")
    assert again["first_round"] == 1 and again["picked_up_from"] is None


def test_a_flow_that_empties_its_state_makes_the_next_run_start_clean(
    workspace: Path, flow_writer: Callable[[str, str], Path], run_here: Callable[..., Any]
) -> None:
    """Guards SPEC §5.5: the search stops at the emptied state; the chain goes on from
    that run (round numbers continue, ``picked_up_from`` names it)."""
    flow_writer("empties", EMPTIES)
    runs = [run_here("empties")[1] for _ in range(4)]
    assert [state_of(workspace, r["run"])["empties"] for r in runs] == [
        {"n": 1},
        {"n": 2},
        {},
        {"n": 1},
    ]
    assert runs[3]["picked_up_from"] == runs[2]["run"] and runs[3]["first_round"] == 4


def test_a_flow_that_raises_ends_failed_with_its_state_kept(
    workspace: Path, flow_writer: Callable[[str, str], Path], run_here: Callable[..., Any]
) -> None:
    """Guards the end of a failing run: failed, the error named, the state it set
    saved, and the next run picking up one round past the one that failed."""
    flow_writer("fails", FAILS)
    code, failed, said = run_here("fails")
    assert code != 0 and failed["status"] == "failed"
    assert "boom in round" in str(failed["error"]) and "Traceback" not in said.splitlines()[-1]
    assert state_of(workspace, failed["run"]) == {"fails": {"before": True}}
    _, after, _ = run_here("fails")
    assert after["picked_up_from"] == failed["run"] and after["first_round"] == 2
