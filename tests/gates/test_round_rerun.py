"""SPEC §21: an answered question re-runs the round that asked, as that same round — the
same number, the same item, not counted again by a rounds budget — and an answer goes
only to the ``ask`` of its own gate (its round, its place in the round, its question),
never to a later one. Real detached runs, the real CLI."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.conftest import CLI, events, wait_for, write_flow

# Asks on rounds 3, 6, 9…, always the same question: only the round tells them apart.
EVERY_THIRD = """
    from flowdrop_tui import flow

    @flow(budget={"rounds": 6})
    def main(run):
        for r in run.rounds():
            run.state["seen"] = run.state.get("seen", 0) + 1
            if run.round % 3 == 0:
                answer = run.ask("carry on?")
                print(f"round {r}: answer {answer}", flush=True)
"""

# Asks on the rounds whose item has a file ``ask-ITEM``: a test takes the file away
# between the question and its answer, so the re-run round does not ask again.
WHEN_TOLD = """
    from pathlib import Path
    from flowdrop_tui import flow

    @flow()
    def main(run):
        for item in run.rounds(["a", "b", "c", "d"]):
            print(f"round {run.round}: item {item}", flush=True)
            if Path(f"ask-{item}").exists():
                answer = run.ask("ship?")
                print(f"round {run.round}: answer {answer}", flush=True)
        return "done"
"""


def output(ws: Path, run_id: str) -> str:
    return (ws / ".flowdrop" / "runs" / run_id / "output.log").read_text()


def open_gate(cli: CLI, run_id: str) -> dict[str, Any] | None:
    gate = cli.json("show", run_id)["gate"]
    return gate if isinstance(gate, dict) else None


def main_rounds(ws: Path, run_id: str) -> list[tuple[int, bool]]:
    return [
        (e["round"], bool(e.get("again")))
        for e in events(ws, run_id)
        if e["event"] == "round_started"
    ]


def test_the_asking_round_runs_again_as_itself_and_a_later_ask_opens_a_new_gate(
    cli: CLI, workspace: Path
) -> None:
    write_flow(workspace, "third", EVERY_THIRD)
    run_id = str(cli.json("run", "third", "--detach")["run"])
    first = wait_for(lambda: open_gate(cli, run_id))
    assert first["round"] == 3 and first["question"] == "carry on?"

    cli("answer", run_id, "yes", check=0)
    second = wait_for(lambda: (g := open_gate(cli, run_id)) and g["id"] != first["id"] and g)
    assert second["round"] == 6 and second["question"] == "carry on?"
    said = output(workspace, run_id)
    assert "round 3: answer yes" in said and "round 4: answer" not in said
    assert "round 6: answer" not in said  # round 6 asked: round 3's answer is not its own
    assert main_rounds(workspace, run_id) == [
        (1, False), (2, False), (3, False), (3, True), (4, False), (5, False), (6, False)
    ]  # fmt: skip
    shown = cli.json("show", run_id)
    assert shown["rounds"] == 6 and shown["budget"]["rounds"]["used"] == 6

    # Round 6 is the last the budget allows, and its re-run is no new round: answered,
    # it runs again as round 6, then the budget pauses the run before round 7.
    cli("answer", run_id, "on", check=0)
    wait_for(lambda: (s := cli.json("show", run_id))["status"] == "paused" and s["gate"] is None)
    shown = cli.json("show", run_id)
    assert "round 6: answer on" in output(workspace, run_id)
    assert shown["paused_by"]["kind"] == "budget", shown["paused_by"]
    assert shown["budget"]["rounds"]["used"] == 6 and shown["rounds"] == 6
    assert main_rounds(workspace, run_id)[-1] == (6, True)
    seen = cli.json("show", run_id)["state"]["third"]["seen"]
    assert seen == 8  # rounds 1–6 and the two re-runs: code before ask ran again


def test_an_answer_no_ask_of_its_gate_took_is_closed_never_returned_later(
    cli: CLI, workspace: Path
) -> None:
    (workspace / "ask-b").write_text("")
    (workspace / "ask-d").write_text("")
    write_flow(workspace, "told", WHEN_TOLD)
    run_id = str(cli.json("run", "told", "--detach")["run"])
    first = wait_for(lambda: open_gate(cli, run_id))
    assert first["round"] == 2 and first["question"] == "ship?"

    (workspace / "ask-b").unlink()  # the re-run of round 2 will not ask
    cli("answer", run_id, "yes", check=0)
    second = wait_for(lambda: (g := open_gate(cli, run_id)) and g["id"] != first["id"] and g)
    assert second["round"] == 4 and second["question"] == "ship?"
    said = output(workspace, run_id)
    assert said.count("round 2: item b") == 2 and "answer yes" not in said
    closed = [e for e in events(workspace, run_id) if e["event"] == "gate_closed"]
    assert [(e["gate"], e["round"]) for e in closed] == [(first["id"], 2)], closed
    # SPEC §6: paused at round 4's question, three rounds finished and item "d" next —
    # the one its resume yields again
    snapshot = cli.json("snapshot", run_id)
    assert (snapshot["iterationCount"], snapshot["iterator"]) == (3, 3), snapshot

    cli("answer", run_id, "no", check=0)
    wait_for(lambda: cli.json("show", run_id)["status"] == "completed")
    said = output(workspace, run_id)
    assert "round 4: answer no" in said and "answer yes" not in said
    assert main_rounds(workspace, run_id) == [
        (1, False), (2, False), (2, True), (3, False), (4, False), (4, True)
    ]  # fmt: skip
    assert cli.json("show", run_id)["rounds"] == 4
    assert cli.json("snapshot", run_id)["iterationCount"] == 4  # each round counted once


def test_a_plain_loop_picked_up_counts_on(cli: CLI, workspace: Path) -> None:
    """A run no question paused re-runs nothing: picked up, rounds 1–3 then 4–6."""
    write_flow(
        workspace,
        "counter",
        """
        from flowdrop_tui import flow

        @flow(resumable=True)
        def main(run):
            for r in run.rounds(range(3)):
                run.state["last"] = run.round  # a change each round (SPEC §20)
        """,
    )
    cli("run", "counter", check=0)
    cli("run", "counter", check=0)
    second, first = cli.json("runs", "counter")  # newest first
    assert (first["first_round"], first["last_round"]) == (1, 3), first
    assert (second["first_round"], second["last_round"]) == (4, 6), second
    for run in (first, second):
        assert all(not again for _, again in main_rounds(workspace, str(run["run"])))


def test_a_gate_recorded_before_its_tie_still_gets_its_answer_to_its_question() -> None:
    """A run paused on a question by the code before (``gate_opened`` with no ``ask`` nor
    ``in_round``) and answered after an upgrade: its answer goes to the first ``ask`` of
    that question, not to another question, and is not closed as the round begins."""
    from flowdrop_tui.core.records.run_record.run_fold import fold
    from flowdrop_tui.core.run.notices import Answers

    info = fold(
        "r",
        Path("/nonexistent"),
        [
            {"event": "created", "key": "k", "first_round": 1},
            {"event": "started"},
            {"event": "round_started", "key": "k", "round": 1},
            {"event": "gate_opened", "gate": "g1", "question": "ship?", "key": "k", "round": 1},
            {"event": "gate_answered", "gate": "g1", "answer": "yes"},
        ],
    )
    assert info.rerun_round is None  # no tie recorded: the old way, the next number
    answers = Answers(info.gate_answers)
    assert answers.round_begins(2) == []
    assert answers.take("k", "other?", 2) == (False, None)
    assert answers.take("k", "ship?", 2) == (True, "yes")
    assert answers.unused() == []
