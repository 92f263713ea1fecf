"""Start, stop, stop now, pause, resume and close, and every refusal these verbs give:
the same answers, codes and exit statuses in local and remote mode (SPEC §10, §11,
§14, §18 — "every rule above holds in remote mode too"). Black-box: the CLI only."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from tests.contract.conftest import Mode

MISSING = "20260101T000000.000Z-abcdef"  # a well-formed run id no record has


def test_stop_asks_after_the_round_and_an_ended_run_refuses_every_verb(mode: Mode) -> None:
    """Guards `stop`: the round in flight ends, the run ends cancelled at that round;
    a pause behind a pending stop is refused; an ended run refuses stop, pause and
    resume with PIPELINE_TERMINAL (exit 3)."""
    mode.add_gated()
    run = mode.start("gated")
    mode.wait_round(run, "gated", 1)
    stopped = mode.json("stop", run)
    assert set(stopped) == {"run", "action", "round", "message", "status"}, stopped
    assert stopped["run"] == run and stopped["action"] == "stop" and stopped["round"] == 1
    assert stopped["status"] == "running"
    assert mode.refused("pause", run) == "INWARD_SIGNAL_ALREADY_PENDING"
    mode.go(1)
    shown = mode.wait_status(run, "cancelled")
    assert shown["last_round"] == 1 and shown["rounds"] == 1
    for verb in (["stop", run], ["stop", run, "--now"], ["pause", run], ["resume", run]):
        assert mode.refused(*verb) == "PIPELINE_TERMINAL", verb
    assert mode.refused("resume", run, "--detach") == "PIPELINE_TERMINAL"


def test_stop_now_interrupts_the_round_in_flight(mode: Mode) -> None:
    """Guards `stop --now`: the round held for ever is interrupted and the run ends
    cancelled in that round, its state saved; a second `stop` of a run with a stop
    pending is a stop now too."""
    mode.add_gated()
    run = mode.start("gated")
    mode.wait_round(run, "gated", 1)
    now = mode.json("stop", run, "--now")
    assert now["run"] == run and now["action"] == "stop_now" and now["round"] == 1
    shown = mode.wait_status(run, "cancelled")
    assert shown["last_round"] == 1 and shown["state"]["gated"]["round"] == 1
    # a plain stop, then a second stop: it becomes a stop now (the round is not waited on)
    again = mode.start("gated", after_end=True)
    mode.wait_round(again, "gated", 2)  # picked up from the cancelled run: round 2
    assert mode.json("stop", again)["action"] == "stop"
    assert mode.json("stop", again)["action"] == "stop_now"
    assert mode.wait_status(again, "cancelled")["last_round"] == 2


def test_pause_and_resume_with_their_refusals(mode: Mode) -> None:
    """Guards pause and resume: a second start of the key is ALREADY_RUNNING; resuming
    a live run NO_ACTIVE_PAUSE; a second pause INWARD_SIGNAL_ALREADY_PENDING; a pause of
    a paused run ALREADY_PAUSED; `resume --detach` continues the same record."""
    mode.add_gated()
    run = mode.start("gated")
    mode.wait_round(run, "gated", 1)
    assert mode.refused("run", "gated", "--detach") == "ALREADY_RUNNING"
    assert mode.refused("resume", run, "--detach") == "NO_ACTIVE_PAUSE"
    paused = mode.json("pause", run)
    assert set(paused) == {"run", "action", "round", "message", "status"}, paused
    assert paused["action"] == "pause" and paused["round"] == 1
    assert paused["status"] == "running"
    assert mode.refused("pause", run) == "INWARD_SIGNAL_ALREADY_PENDING"
    mode.go(1)
    shown = mode.wait_status(run, "paused")
    assert shown["last_round"] == 1
    assert mode.refused("pause", run) == "ALREADY_PAUSED"
    resumed = mode.json("resume", run, "--detach")
    assert resumed == {"run": run, "flow": "gated", "warnings": []}
    shown = mode.wait_round(run, "gated", 2)
    assert shown["first_round"] == 1  # the same record, going on
    assert mode.refused("resume", run, "--detach") == "NO_ACTIVE_PAUSE"
    assert mode.json("stop", run)["round"] == 2
    mode.go(2)
    assert mode.wait_status(run, "cancelled")["last_round"] == 2
    assert [r["run"] for r in mode.json("runs", "gated")] == [run]


def test_stop_closes_a_paused_run_and_an_ended_run_is_never_resumed(
    mode: Mode, tmp_path: Path
) -> None:
    """Guards closing: `stop` of a paused run ends it cancelled at once, without
    running it; then resuming it (`resume`, `run --resume`), starting from its terminal
    snapshot, and a round over the chain's budget are each refused (exit 3)."""
    mode.add_gated()
    run = mode.start("gated")
    mode.wait_round(run, "gated", 1)
    mode.json("pause", run)
    mode.go(1)
    mode.wait_status(run, "paused")
    closed = mode.json("stop", run)
    assert closed["run"] == run and closed["action"] == "closed"
    assert closed["status"] == "cancelled" and closed["round"] == 1
    shown = mode.show(run)
    assert shown["status"] == "cancelled" and shown["last_round"] == 1
    assert mode.refused("resume", run, "--detach") == "PIPELINE_TERMINAL"
    resume = ("run", "gated", "--resume", run, "--detach")
    assert mode.refused(*resume, after_end=True) == "PIPELINE_TERMINAL"
    snapshot = tmp_path / "ended.json"
    done = mode.cli("snapshot", run)
    assert done.returncode == 0, done.stderr
    snapshot.write_text(done.stdout)
    from_snapshot = ("run", "gated", "--snapshot", str(snapshot), "--detach")
    assert mode.refused(*from_snapshot, after_end=True) == "PIPELINE_TERMINAL"
    # one round used along the chain: a budget of one round leaves none
    over = ("run", "gated", "--max-rounds", "1", "--detach")
    assert mode.refused(*over, after_end=True) == "BUDGET_EXHAUSTED"
    assert [r["run"] for r in mode.json("runs", "gated")] == [run]  # nothing was started


def test_a_missing_or_malformed_run_is_a_usage_error(mode: Mode) -> None:
    """Guards exit 2: a run id no record has is NOT_FOUND, a malformed one INVALID_NAME,
    an unknown flow NOT_FOUND — for each verb, before anything is asked of a run."""
    mode.add_gated()
    for verb in ("stop", "pause", "resume", "show", "logs", "snapshot"):
        assert mode.refused(verb, MISSING, exit_code=2) == "NOT_FOUND", verb
        assert mode.refused(verb, "../escape", exit_code=2) == "INVALID_NAME", verb
    assert mode.refused("stop", MISSING, "--now", exit_code=2) == "NOT_FOUND"
    assert mode.refused("run", "nosuchflow", "--detach", exit_code=2) == "NOT_FOUND"
    assert mode.refused("run", "gated", "--from", MISSING, "--detach", exit_code=2) == "NOT_FOUND"
    assert mode.json("runs") == []


ASKS = """
    from flowdrop_tui import flow

    @flow()
    def main(run):
        for _ in run.rounds(range(1)):
            answer = run.ask("land it?", choices=["land", "drop"])
        return answer
"""


def test_a_question_pauses_the_run_and_its_answer_resumes_it(mode: Mode) -> None:
    """Guards SPEC §21 in both modes: `ask` pauses with the gate in `show`; an answer
    outside the choices is USAGE, an unknown gate GATE_UNKNOWN (exit 2); `answer`
    resumes the same run to its end with the answer as its result; the answered gate
    is then GATE_CLOSED, and the inbox lists the question while it is open."""
    mode.add_flow("asks", ASKS)
    run = mode.start("asks")
    shown = mode.wait("the question", lambda: (s := mode.show(run))["gate"] and s)
    assert shown["status"] == "paused" and shown["gate"]["question"] == "land it?"
    gate = shown["gate"]["id"]
    [item] = mode.json("inbox")
    assert item["run"] == run and item["kind"] == "gate" and item["gate"] == gate
    assert mode.refused("answer", run, "maybe", exit_code=2) == "USAGE"
    assert mode.refused("answer", run, "land", "--gate", "gnope", exit_code=2) == "GATE_UNKNOWN"
    answered = mode.json("answer", run, "land")
    assert answered["run"] == run and answered["gate"] == gate and answered["answer"] == "land"
    done = mode.wait_status(run, "completed")
    assert done["result"] == "land" and done["gate"] is None
    assert mode.refused("answer", run, "land", "--gate", gate) == "GATE_CLOSED"


def test_run_of_a_paused_flow_resumes_it(mode: Mode) -> None:
    """Guards SG-12 clause 3 in both modes: `run FLOW` while the flow's newest run is
    paused continues that run in its own record (as `resume` does), its output going on
    after what it printed before the pause — in remote mode on a worker, whose shipping
    of output.log starts at the record's end, not at byte 0 (the record's output is in
    two pieces here, so a resend from byte 0 cannot match the first)."""
    mode.add_gated()

    def printed(line: str) -> str:
        def seen() -> str | None:
            done = mode.cli("logs", run)
            return done.stdout if line in done.stdout else None

        found: str = mode.wait(f"{line!r} in the run's output", seen)
        return found

    run = mode.start("gated")
    mode.wait_round(run, "gated", 1)
    printed("round 1")
    mode.go(1)
    mode.wait_round(run, "gated", 2)
    printed("round 2")
    mode.json("pause", run)
    mode.go(2)
    mode.wait_status(run, "paused")
    again = mode.json("run", "gated", "--detach")
    assert again["run"] == run and again["flow"] == "gated", again
    shown = mode.wait_round(run, "gated", 3)
    assert shown["first_round"] == 1  # the same record, going on
    mode.go(3)
    mode.wait_round(run, "gated", 4)
    out = printed("round 4")
    assert [line for line in out.splitlines() if line.startswith("round ")] == [
        "round 1",
        "round 2",
        "round 3",
        "round 4",
    ], out
    assert mode.json("stop", run, "--now")["run"] == run
    assert mode.wait_status(run, "cancelled")["last_round"] == 4
    assert [r["run"] for r in mode.json("runs", "gated")] == [run]


EVERY_THIRD = """
    from flowdrop_tui import flow

    @flow()
    def main(run):
        for r in run.rounds():
            if run.round % 3 == 0:
                answer = run.ask("carry on?", choices=["yes", "stop"])
                run.state[f"round {r}"] = answer
                if answer == "stop":
                    return dict(run.state)
"""


def test_an_answer_reruns_its_own_round_and_a_later_round_asks_anew(mode: Mode) -> None:
    """Guards SPEC §21 in both modes: answered at round 3, the run resumes as round 3
    (not counted twice), its `ask` gets the answer, and round 6 opens a new gate."""
    mode.add_flow("third", EVERY_THIRD)
    run = mode.start("third")
    first = mode.wait("round 3's question", lambda: mode.show(run)["gate"])
    assert first["round"] == 3 and first["question"] == "carry on?"
    mode.json("answer", run, "yes")

    def asked_anew() -> dict[str, Any] | None:
        gate = mode.show(run)["gate"]
        return gate if gate and gate["id"] != first["id"] else None

    second = mode.wait("round 6's question", asked_anew)
    assert second["round"] == 6
    shown = mode.show(run)
    assert shown["state"]["third"] == {"round 3": "yes"} and shown["rounds"] == 6
    mode.json("answer", run, "stop")
    done = mode.wait_status(run, "completed")
    assert done["result"] == {"round 3": "yes", "round 6": "stop"} and done["rounds"] == 6


TWO_ROUNDS = """
    from flowdrop_tui import flow

    @flow(resumable=True)
    def main(run):
        for r in run.rounds(range(2)):
            run.state["round"] = r
"""


def test_a_foreground_run_runs_here_or_is_started_elsewhere_to_be_followed(mode: Mode) -> None:
    """Guards the seam's one start-and-follow question (``Mode.started_elsewhere``): a
    `run` without --detach runs to its end in this process in local mode, and in
    remote mode is started on a worker, the line naming it and how to follow it —
    the run completing both ways, its rounds the same."""
    mode.add_flow("two", TWO_ROUNDS)
    done = mode.cli("run", "two")
    assert done.returncode == 0, done.stdout + done.stderr
    if mode.name == "local":
        said = re.search(r"run (\S+) completed \(rounds 1–2\)", done.stdout + done.stderr)
        assert said is not None, done.stdout + done.stderr
        run = said.group(1)
    else:
        run = done.stdout.strip()
        assert f"run {run} is on worker " in done.stderr, done.stderr
        assert f"follow it with: flowdrop-tui logs -f {run}" in done.stderr, done.stderr
    shown = mode.wait_status(run, "completed")
    assert (shown["first_round"], shown["last_round"]) == (1, 2), shown
