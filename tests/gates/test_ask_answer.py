"""SPEC §21: ``run.ask`` pauses the run holding no process; ``answer`` resumes it, the
round re-runs and ``ask`` returns the answer — with real detached processes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import orjson

from flowdrop_tui.core.files import locks
from tests.conftest import CLI, events, state_of, wait_for, write_flow

ASKS = """
    from flowdrop_tui import flow

    @flow()
    def main(run):
        for n in run.rounds(range(2)):
            run.state["before_ask"] = run.state.get("before_ask", 0) + 1
            answer = run.ask(f"ship {n}?", choices=["yes", "no"])
            run.state.setdefault("answers", []).append(answer)
        return answer
"""


def gate_of(cli: CLI, run_id: str) -> dict[str, object]:
    shown = cli.json("show", run_id)
    assert shown["status"] == "paused", shown
    gate = shown["gate"]
    assert isinstance(gate, dict)
    return gate


def paused_on_question(cli: CLI, ws: Path, body: str = ASKS, name: str = "asks") -> str:
    write_flow(ws, name, body)
    run_id = str(cli.json("run", name, "--detach")["run"])
    wait_for(lambda: cli.json("show", run_id)["gate"] is not None)
    return run_id


def released(ws: Path, run_id: str) -> bool:
    return locks.holder_pid(ws / ".flowdrop" / "runs" / run_id / "live.lock") is None


def test_ask_pauses_holding_no_process_and_answers_resume_to_the_answer(
    cli: CLI, workspace: Path
) -> None:
    run_id = paused_on_question(cli, workspace)
    gate = gate_of(cli, run_id)
    assert gate["question"] == "ship 0?" and gate["choices"] == ["yes", "no"]
    wait_for(lambda: released(workspace, run_id))  # no process waits for the answer
    [opened] = [e for e in events(workspace, run_id) if e["event"] == "gate_opened"]
    assert opened["gate"] == gate["id"] and opened["question"] == "ship 0?"
    assert cli.json("runs", "asks")[0]["gate"]["id"] == gate["id"]

    done = cli.json("answer", run_id, "yes")
    assert done["run"] == run_id and done["gate"] == gate["id"] and done["answer"] == "yes"
    wait_for(lambda: (cli.json("show", run_id)["gate"] or {}).get("question") == "ship 1?")
    cli("answer", run_id, "no", check=0)
    wait_for(lambda: cli.json("show", run_id)["status"] == "completed")
    shown = cli.json("show", run_id)
    assert shown["result"] == "no" and shown["gate"] is None
    state = state_of(workspace, run_id)["asks"]
    assert state["answers"] == ["yes", "no"]
    assert state["before_ask"] == 4  # code before ask in the asking round ran again
    answered = [e for e in events(workspace, run_id) if e["event"] == "gate_answered"]
    assert [e["answer"] for e in answered] == ["yes", "no"]
    assert answered[0]["by"]["via"] == "cli" and answered[0]["by"]["user"]
    assert answered[0]["by"]["host"] and isinstance(answered[0]["by"]["pid"], int)


def test_an_answer_not_among_the_choices_is_refused_naming_them(cli: CLI, workspace: Path) -> None:
    run_id = paused_on_question(cli, workspace)
    done = cli("answer", run_id, "maybe", "--json", check=2)
    error = orjson.loads(done.stdout)["error"]
    assert error["code"] == "USAGE" and "'yes', 'no'" in error["message"]
    assert cli.json("show", run_id)["status"] == "paused"


def test_unknown_and_closed_gates_are_refused(cli: CLI, workspace: Path) -> None:
    run_id = paused_on_question(cli, workspace)
    first = str(gate_of(cli, run_id)["id"])
    unknown = orjson.loads(
        cli("answer", run_id, "yes", "--gate", "gnope", "--json", check=2).stdout
    )
    assert unknown["error"]["code"] == "GATE_UNKNOWN" and first in unknown["error"]["message"]
    cli("answer", run_id, "yes", "--gate", first, check=0)
    wait_for(lambda: (cli.json("show", run_id)["gate"] or {}).get("question") == "ship 1?")
    closed = orjson.loads(cli("answer", run_id, "no", "--gate", first, "--json", check=3).stdout)
    assert closed["error"]["code"] == "GATE_CLOSED" and "'yes'" in closed["error"]["message"]

    write_flow(
        workspace, "plain", "from flowdrop_tui import flow\n@flow()\ndef main(run):\n    return 1\n"
    )
    cli("run", "plain", check=0)
    plain = str(cli.json("runs", "plain")[0]["run"])
    never = orjson.loads(cli("answer", plain, "x", "--json", check=2).stdout)
    assert never["error"]["code"] == "GATE_UNKNOWN"
    gone = orjson.loads(cli("answer", "20990101T000000.000Z-abcdef", "x", "--json", check=2).stdout)
    assert gone["error"]["code"] == "NOT_FOUND"
    bad = orjson.loads(cli("answer", "../x", "y", "--json", check=2).stdout)
    assert bad["error"]["code"] == "INVALID_NAME"


def test_a_plain_resume_asks_again_and_closes_the_old_gate(cli: CLI, workspace: Path) -> None:
    run_id = paused_on_question(cli, workspace)
    first = str(gate_of(cli, run_id)["id"])
    wait_for(lambda: released(workspace, run_id))
    cli("resume", run_id, "--detach", check=0)
    wait_for(lambda: (cli.json("show", run_id)["gate"] or {}).get("id") not in (None, first))
    closed = orjson.loads(cli("answer", run_id, "yes", "--gate", first, "--json", check=3).stdout)
    assert closed["error"]["code"] == "GATE_CLOSED"
    cli("stop", run_id, check=0)  # a paused run closed for good: its question with it
    assert cli.json("show", run_id)["status"] == "cancelled"
    ended = orjson.loads(cli("answer", run_id, "yes", "--json", check=3).stdout)
    assert ended["error"]["code"] == "GATE_CLOSED"


TWO_IN_ONE_ROUND = """
    from flowdrop_tui import flow

    @flow()
    def main(run):
        for _ in run.rounds(range(1)):
            first = run.ask("plan?", choices=["a", "b"])
            second = run.ask("free text?")
            run.state["got"] = [first, second]
        return run.state["got"]
"""


def test_two_questions_in_one_round_get_both_answers_back_in_order(
    cli: CLI, workspace: Path
) -> None:
    run_id = paused_on_question(cli, workspace, TWO_IN_ONE_ROUND, "two")
    cli("answer", run_id, "b", check=0)
    wait_for(lambda: (cli.json("show", run_id)["gate"] or {}).get("question") == "free text?")
    assert cli.json("show", run_id)["gate"]["choices"] is None
    cli("answer", run_id, "anything at all", check=0)
    wait_for(lambda: cli.json("show", run_id)["status"] == "completed")
    assert cli.json("show", run_id)["result"] == ["b", "anything at all"]


HELD_AFTER_ASK = """
    import time
    from pathlib import Path
    from flowdrop_tui import flow

    @flow()
    def main(run):
        for _ in run.rounds(range(1)):
            try:
                answer = run.ask("go?", choices=["go"])
            finally:
                while Path("hold").exists():  # the process lingers, holding the run
                    time.sleep(0.05)
        return answer
"""


def test_kill_9_while_the_question_is_open_and_the_answer_still_resumes(
    cli: CLI, workspace: Path
) -> None:
    (workspace / "hold").write_text("")
    run_id = paused_on_question(cli, workspace, HELD_AFTER_ASK, "held")
    pid = locks.holder_pid(workspace / ".flowdrop" / "runs" / run_id / "live.lock")
    assert pid is not None
    os.killpg(pid, signal.SIGKILL)  # before it recorded `paused`, or let the run go
    wait_for(lambda: released(workspace, run_id))
    assert not any(e["event"] == "paused" for e in events(workspace, run_id))
    assert cli.json("show", run_id)["status"] == "paused"  # the gate is the pause
    (workspace / "hold").unlink()
    cli("answer", run_id, "go", check=0)
    wait_for(lambda: cli.json("show", run_id)["status"] == "completed")
    assert cli.json("show", run_id)["result"] == "go"


# A flow whose session starts a detached grandchild (setsid, its parent gone at once)
# that waits for the question and answers it: refused, whether it answers itself or
# through a command it starts with a scrubbed environment.
SELF_ANSWER = """
import subprocess, sys
from flowdrop_tui import flow

GRANDCHILD = r'''
import os, subprocess, sys, time, json
ws, out, scrub = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
cmd = [sys.executable, "-m", "flowdrop_tui", "--workspace", ws]
deadline = time.time() + 60
while time.time() < deadline:
    shown = subprocess.run(cmd + ["runs", "--json"], capture_output=True, text=True)
    rows = json.loads(shown.stdout or "[]")
    if rows and rows[0].get("gate"):
        break
    time.sleep(0.1)
env = None
if scrub:
    env = {"PATH": os.environ["PATH"], "PYTHONPATH": os.environ.get("PYTHONPATH", "")}
answer = cmd + ["answer", rows[0]["run"], "yes", "--json"]
done = subprocess.run(answer, capture_output=True, text=True, env=env)
told = {"code": done.returncode, "out": done.stdout, "sid": os.getsid(0), "pid": os.getpid()}
with open(out, "w") as f:
    json.dump(told, f)
'''

@flow()
def main(run):
    for _ in run.rounds(range(1)):
        if "spawned" not in run.state:
            run.state["spawned"] = True
            # a child that starts the grandchild in a session of its own, then exits
            spawn = (
                "import subprocess, sys; subprocess.Popen(sys.argv[1:], "
                "start_new_session=True, stdin=subprocess.DEVNULL, "
                "stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)"
            )
            grandchild = [sys.executable, "-c", GRANDCHILD, str(run.workspace),
                          str(run.workspace / "{out}"), "{scrub}"]
            subprocess.run([sys.executable, "-c", spawn, *grandchild], check=True)
        answer = run.ask("merge?", choices=["yes", "no"])
    return answer
"""


def self_answer(cli: CLI, workspace: Path, scrub: str) -> dict[str, object]:
    out = f"answer-{scrub}.json"
    body = SELF_ANSWER.replace("{out}", out).replace("{scrub}", scrub)
    run_id = paused_on_question(cli, workspace, body, f"selfish{scrub}")
    found = wait_for(lambda: (workspace / out).is_file() and (workspace / out).read_text(), 60)
    told: dict[str, object] = orjson.loads(found)
    assert told["sid"] == told["pid"]  # it led a session of its own (setsid)
    assert told["code"] == 3, told
    error = orjson.loads(str(told["out"]))["error"]
    assert error["code"] == "GATE_SELF_ANSWER"
    assert cli.json("show", run_id)["status"] == "paused"  # still waiting for a person
    assert not any(e["event"] == "gate_answered" for e in events(workspace, run_id))
    cli("answer", run_id, "no", check=0)  # a person answers
    wait_for(lambda: cli.json("show", run_id)["status"] == "completed")
    return told


def test_a_self_answer_from_a_detached_grandchild_is_refused(cli: CLI, workspace: Path) -> None:
    """Proves, through ``self_answer``'s asserts, that a grandchild of the run in a
    session of its own is refused GATE_SELF_ANSWER and the run stays paused for a person."""
    self_answer(cli, workspace, "0")


def test_a_self_answer_through_a_scrubbed_environment_is_refused(cli: CLI, workspace: Path) -> None:
    """Proves, through ``self_answer``'s asserts, the same refusal when the flow scrubs
    ``FLOWDROP_*`` from the environment before it answers itself."""
    self_answer(cli, workspace, "1")


def test_an_answer_from_an_unrelated_process_with_another_runs_mark_is_taken(
    cli: CLI, workspace: Path
) -> None:
    run_id = paused_on_question(cli, workspace)
    env = {**os.environ, "FLOWDROP_RUN_ID": "20200101T000000.000Z-000000"}
    done = subprocess.run(
        [sys.executable, "-m", "flowdrop_tui", "answer", run_id, "yes"],
        cwd=workspace,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
