"""Budgets (SPEC §14): counted along a chain of real runs, through kill -9, each kind
reached, raised on resume, refused before any run exists."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from tests.conftest import CLI, events, wait_for, write_flow

HELD = """
import pathlib, time
from flowdrop_tui import flow

@flow(resumable=True, budget={"rounds": 5})
def main(run):
    for n in run.rounds():
        run.state["n"] = n
        while (run.workspace / "hold").exists():
            time.sleep(0.02)
"""

COUNTER = """
from flowdrop_tui import flow

@flow(resumable=True, budget=BUDGET)
def main(run):
    for n in run.rounds():
        run.state["n"] = n
"""


def runs_of(ws: Path) -> list[str]:
    folder = ws / ".flowdrop" / "runs"
    return sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []


def started(ws: Path, run_id: str) -> list[int]:
    return [e["round"] for e in events(ws, run_id) if e["event"] == "round_started"]


def kill9(ws: Path, run_id: str) -> None:
    """SIGKILL the run's whole process group, as a machine going down would."""
    created = next(e for e in events(ws, run_id) if e["event"] == "created")
    os.killpg(created["pgid"], signal.SIGKILL)


def counter(ws: Path, budget: str) -> None:
    write_flow(ws, "loop", COUNTER.replace("BUDGET", budget))


def test_five_rounds_across_three_pick_ups_with_kills_then_resume_raises(
    workspace: Path, cli: CLI
) -> None:
    """The issue's 'done when': budget={"rounds": 5} picked up three times runs exactly 5
    rounds in total, then pauses; resume --max-rounds 8 runs 3 more. Guards against a
    count kept in memory (lost to kill -9) or restarted by each pick-up."""
    write_flow(workspace, "held", HELD)
    gate = workspace / "hold"
    gate.write_text("")
    killed = []
    for expected_round in (1, 2, 3):
        run_id = str(cli.json("run", "held", "--detach")["run"])
        wait_for(lambda r=run_id: started(workspace, r))  # type: ignore[misc]
        kill9(workspace, run_id)
        wait_for(lambda r=run_id: cli.json("show", r)["status"] == "interrupted")  # type: ignore[misc]
        assert started(workspace, run_id) == [expected_round]
        killed.append(run_id)
    gate.unlink()
    # the third pick-up: rounds 4 and 5, then a pause before round 6
    done = cli("run", "held", "--json", check=0)
    last = [r for r in runs_of(workspace) if r not in killed]
    assert len(last) == 1
    run_id = last[0]
    assert started(workspace, run_id) == [4, 5]
    reached = [e for e in events(workspace, run_id) if e["event"] == "budget_reached"]
    assert [(e["budget"], e["limit"], e["used"]) for e in reached] == [("rounds", 5, 5)]
    assert '"status": "paused"' in done.stdout
    assert "rounds budget reached (5 of 5 used)" in done.stderr
    created = next(e for e in events(workspace, run_id) if e["event"] == "created")
    assert created["budget"]["carried"]["rounds"] == 3  # the chain's count before it
    assert created["budget"]["limits"]["rounds"] == 5
    total = sum(len(started(workspace, r)) for r in runs_of(workspace))
    assert total == 5

    cli("resume", run_id, "--max-rounds", "8", check=0)
    assert started(workspace, run_id) == [4, 5, 6, 7, 8]
    assert cli.json("show", run_id)["budget"]["rounds"] == {"limit": 8, "used": 8, "left": 0}
    resumed = [e for e in events(workspace, run_id) if e["event"] == "resumed"]
    assert resumed[-1]["budget"]["overrides"] == {"rounds": 8}
    assert runs_of(workspace) == sorted([*killed, run_id])  # the same run went on


def test_a_chain_keeps_a_limit_given_on_the_command_line_until_another_is_given(
    workspace: Path, cli: CLI
) -> None:
    """SPEC §14: --max-… overrides for that run and those picked up after it."""
    counter(workspace, '{"rounds": 50}')
    first = cli.json("run", "loop", "--max-rounds", "3")
    assert first["status"] == "paused" and first["last_round"] == 3
    cli("stop", first["run"], check=0)  # closed cancelled: the next run picks it up
    before = runs_of(workspace)
    refused = cli("run", "loop", "--json", check=3)
    assert '"code": "BUDGET_EXHAUSTED"' in refused.stdout
    assert "rounds budget: 3 used of 3" in refused.stderr
    assert runs_of(workspace) == before  # refused before any run exists
    second = cli.json("run", "loop", "--max-rounds", "6")
    assert (second["first_round"], second["last_round"]) == (4, 6)
    assert second["budget"]["rounds"] == {"limit": 6, "used": 6, "left": 0}


def test_fresh_starts_a_new_count(workspace: Path, cli: CLI) -> None:
    counter(workspace, '{"rounds": 2}')
    first = cli.json("run", "loop")
    cli("stop", first["run"], check=0)
    cli("run", "loop", check=3)
    fresh = cli.json("run", "loop", "--fresh")
    assert (fresh["first_round"], fresh["last_round"], fresh["status"]) == (1, 2, "paused")


def test_resume_of_a_run_out_of_budget_is_refused_and_leaves_its_record_alone(
    workspace: Path, cli: CLI
) -> None:
    """A resume that would begin a round over budget: BUDGET_EXHAUSTED (exit 3), naming
    the budget, its limit and what is used; the paused run is not touched."""
    counter(workspace, '{"rounds": 2}')
    run_id = cli.json("run", "loop")["run"]
    cycle = workspace / ".flowdrop" / "runs" / run_id / "cycle.jsonl"
    before = cycle.read_bytes()
    for args in (("resume", run_id), ("run", "loop"), ("run", "loop", "--resume", run_id)):
        refused = cli.json(*args, check=3)
        assert refused["error"]["code"] == "BUDGET_EXHAUSTED"
        message = refused["error"]["message"]
        assert "rounds" in message and "2 used of 2" in message and "--max-rounds" in message
    assert cycle.read_bytes() == before
    assert cli.json("show", run_id)["status"] == "paused"
    # raised through `run` too: the paused run itself continues (SG-12 clause 3)
    again = cli.json("run", "loop", "--max-rounds", "3")
    assert again["run"] == run_id and again["last_round"] == 3


def test_minutes_count_running_time_not_the_calendar(workspace: Path, cli: CLI) -> None:
    """A minutes budget pauses the run once its running time reaches the limit; time
    spent paused is not counted."""
    write_flow(
        workspace,
        "slow",
        """
        import time
        from flowdrop_tui import flow

        @flow(resumable=True, budget={"minutes": 0.01})
        def main(run):
            for n in run.rounds():
                time.sleep(0.25)
        """,
    )
    out = cli.json("run", "slow")
    assert out["status"] == "paused"
    run_id = out["run"]
    reached = [e for e in events(workspace, run_id) if e["event"] == "budget_reached"]
    assert reached and reached[0]["budget"] == "minutes" and reached[0]["limit"] == 0.01
    used = cli.json("show", run_id)["budget"]["minutes"]["used"]
    assert 0.01 <= used < 0.05
    time.sleep(1.5)  # paused: the calendar moves, the running time does not
    assert cli.json("show", run_id)["budget"]["minutes"]["used"] == used
    refused = cli.json("resume", run_id, check=3)
    assert refused["error"]["code"] == "BUDGET_EXHAUSTED"
    assert "minutes" in refused["error"]["message"]


TOKENS = """
from flowdrop_tui import flow
from flowdrop_tui.core.sessions import Reply, register


class Spend:
    # A plugged-in backend that reports what its session spent in its Reply.
    name = "spend"

    def run(self, session, prompt, options):
        session.open(command="spend")
        # input includes its cache parts (cache_read, cache_write): 400 + 100 a round
        usage = {"input": 400, "output": 100, "cache_read": 250, "cache_write": 50}
        return Reply(0, "spent", usage=usage)


register(Spend())


@flow(resumable=True, budget={"tokens": 1000})
def main(run):
    for n in run.rounds():
        run.session("spend", "go")
"""


def test_tokens_reached_counts_input_and_output(workspace: Path, cli: CLI) -> None:
    """Tokens are input + output from session_closed usage (input holds the cache parts,
    never counted twice); 500 a round against 1000 pauses before round 3, and the count
    carries to a pick-up."""
    write_flow(workspace, "spend", TOKENS)
    out = cli.json("run", "spend")
    assert (out["status"], out["last_round"]) == ("paused", 2)
    assert out["budget"]["tokens"] == {"limit": 1000, "used": 1000, "left": 0}
    run_id = out["run"]
    reached = [e for e in events(workspace, run_id) if e["event"] == "budget_reached"]
    assert [(e["budget"], e["limit"], e["used"]) for e in reached] == [("tokens", 1000, 1000)]
    cli("stop", run_id, check=0)
    refused = cli.json("run", "spend", check=3)
    assert "tokens budget: 1000 used of 1000" in refused["error"]["message"]
    more = cli.json("run", "spend", "--max-tokens", "2000")
    assert (more["first_round"], more["last_round"]) == (3, 4)
    assert more["budget"]["tokens"]["used"] == 2000


def test_budget_is_shown_in_flows_runs_and_show(workspace: Path, cli: CLI) -> None:
    counter(workspace, '{"rounds": 4, "tokens": 900}')
    run_id = cli.json("run", "loop", "--max-rounds", "2")["run"]
    want = {"limit": 2, "used": 2, "left": 0}
    assert cli.json("show", run_id)["budget"]["rounds"] == want
    assert cli.json("runs", "loop")[0]["budget"]["rounds"] == want
    row = next(r for r in cli.json("flows") if r["name"] == "loop")
    assert row["budget"]["rounds"] == want
    assert row["budget"]["tokens"] == {"limit": 900, "used": 0, "left": 900}
    assert "rounds 2/2" in cli("show", run_id, check=0).stdout


@pytest.mark.parametrize(
    "flag",
    [
        ("--max-rounds", "0"),
        ("--max-rounds", "-3"),
        ("--max-rounds", "1.5"),
        ("--max-rounds", "many"),
        ("--max-minutes", "0"),
        ("--max-minutes", "nan"),
        ("--max-minutes", "inf"),
        ("--max-tokens", "1e3"),
    ],
)
def test_a_bad_limit_is_a_usage_error(workspace: Path, cli: CLI, flag: tuple[str, str]) -> None:
    counter(workspace, '{"rounds": 4}')
    for verb in ("run", "plan"):
        refused = cli.json(verb, "loop", *flag, check=2)
        assert refused["error"]["code"] == "USAGE"
        assert flag[0] in refused["error"]["message"]
    assert runs_of(workspace) == []


@pytest.mark.parametrize(
    "budget",
    ['{"rounds": 0}', '{"days": 3}', '"5"', '{"rounds": 2.5}', '{"minutes": True}'],
)
def test_a_bad_declared_budget_is_a_flow_that_cannot_load(
    workspace: Path, cli: CLI, budget: str
) -> None:
    counter(workspace, budget)
    row = next(r for r in cli.json("flows") if r["name"] == "loop")
    assert row["error"] and "budget" in row["error"]
    refused = cli.json("run", "loop", check=1)
    assert refused["error"]["code"] == "FLOW_LOAD_ERROR"
    assert runs_of(workspace) == []


def test_none_lifts_a_declared_limit(workspace: Path, cli: CLI) -> None:
    counter(workspace, '{"rounds": 1}')
    write_flow(
        workspace,
        "loop",
        COUNTER.replace("BUDGET", '{"rounds": 1}').replace(
            'run.state["n"] = n', 'run.state["n"] = n\n        if n == 3:\n            return n'
        ),
    )
    out = cli.json("run", "loop", "--max-rounds", "none", "--yes")
    assert (out["status"], out["last_round"]) == ("completed", 3)


def test_detached_run_and_resume_take_the_limits_too(workspace: Path, cli: CLI) -> None:
    """--max-… reaches a detached run's process (run --detach, resume --detach)."""
    counter(workspace, '{"rounds": 50}')
    run_id = str(cli.json("run", "loop", "--detach", "--max-rounds", "2")["run"])
    wait_for(lambda: cli.json("show", run_id)["status"] == "paused")
    assert started(workspace, run_id) == [1, 2]
    refused = cli.json("resume", run_id, "--detach", check=3)
    assert refused["error"]["code"] == "BUDGET_EXHAUSTED"
    cli.json("resume", run_id, "--detach", "--max-rounds", "4")
    wait_for(
        lambda: (
            cli.json("show", run_id)["status"] == "paused"
            and started(workspace, run_id) == [1, 2, 3, 4]
        )
    )
