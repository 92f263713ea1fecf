"""``plan`` (SPEC §15) against every path of SPEC §7 and the §14/§15 refusals: plan, then
run with the same options, compare. The property: ``run`` does exactly what ``plan``
said — the same start kind, source, first round and warnings, or the same refusal
(code and exit status) with no run created."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest

from tests.conftest import CLI, events, wait_for, write_flow

LOOP = """
import time
from flowdrop_tui import flow

@flow(resumable=RESUMABLE)
def main(run):
    for n in run.rounds():
        run.state["n"] = n
        while (run.workspace / "hold").exists():
            time.sleep(0.02)
        if n % 3 == 0:
            return n
"""

OTHER_ID = "20200101T000000.000Z-abcdef"


def loop(ws: Path, resumable: bool = True, name: str = "f") -> None:
    write_flow(ws, name, LOOP.replace("RESUMABLE", str(resumable)))


def ran(cli: CLI, *args: str) -> str:
    """A finished run of ``f`` (rounds up to the next multiple of 3)."""
    return str(cli.json("run", "f", *args)["run"])


def paused(cli: CLI) -> str:
    """A run of ``f`` paused on a one-round budget."""
    out = cli.json("run", "f", "--fresh", "--max-rounds", "1")
    assert out["status"] == "paused"
    return str(out["run"])


def snapshot_file(ws: Path, cli: CLI, run_id: str) -> str:
    path = ws / f"snap-{run_id}.json"
    path.write_text(cli("snapshot", run_id, check=0).stdout)
    return str(path)


Setup = Callable[[Path, CLI], list[str]]


def fresh_no_runs(ws: Path, cli: CLI) -> list[str]:
    loop(ws)
    return []


def thread(ws: Path, cli: CLI) -> list[str]:
    loop(ws)
    ran(cli)
    return []


def not_resumable(ws: Path, cli: CLI) -> list[str]:
    loop(ws, resumable=False)
    ran(cli)
    return []


def fresh_flag(ws: Path, cli: CLI) -> list[str]:
    loop(ws)
    ran(cli)
    return ["--fresh"]


def from_ended(ws: Path, cli: CLI) -> list[str]:
    loop(ws)
    first = ran(cli)
    ran(cli)
    return ["--from", first]


def from_paused(ws: Path, cli: CLI) -> list[str]:
    loop(ws)
    return ["--from", paused(cli), "--max-rounds", "9"]


def from_unknown(ws: Path, cli: CLI) -> list[str]:
    loop(ws)
    return ["--from", OTHER_ID]


def from_not_resumable(ws: Path, cli: CLI) -> list[str]:
    loop(ws, resumable=False)
    return ["--from", ran(cli)]


def from_other_key(ws: Path, cli: CLI) -> list[str]:
    loop(ws)
    loop(ws, name="g")
    return ["--from", str(cli.json("run", "g")["run"])]


def resume_unknown(ws: Path, cli: CLI) -> list[str]:
    loop(ws)
    ran(cli)
    return ["--resume", "latest"]


def resume_ended(ws: Path, cli: CLI) -> list[str]:
    loop(ws)
    return ["--resume", ran(cli)]


def resume_paused(ws: Path, cli: CLI) -> list[str]:
    loop(ws)
    return ["--resume", paused(cli), "--max-rounds", "9"]


def latest_paused(ws: Path, cli: CLI) -> list[str]:
    loop(ws)
    paused(cli)
    return ["--max-rounds", "9"]


def snapshot_terminal(ws: Path, cli: CLI) -> list[str]:
    loop(ws)
    return ["--snapshot", snapshot_file(ws, cli, ran(cli))]


def snapshot_paused(ws: Path, cli: CLI) -> list[str]:
    loop(ws)
    return ["--snapshot", snapshot_file(ws, cli, paused(cli))]


def snapshot_not_resumable(ws: Path, cli: CLI) -> list[str]:
    loop(ws)
    path = snapshot_file(ws, cli, paused(cli))
    loop(ws, resumable=False)
    return ["--snapshot", path]


def unusable_state(ws: Path, cli: CLI) -> list[str]:
    loop(ws)
    run_id = ran(cli)
    (ws / ".flowdrop" / "runs" / run_id / "state.json").write_text("{not json")
    return []


def live_run(ws: Path, cli: CLI) -> list[str]:
    loop(ws)
    (ws / "hold").write_text("")
    run_id = str(cli.json("run", "f", "--detach")["run"])
    wait_for(lambda: any(e["event"] == "round_started" for e in events(ws, run_id)))
    return []


def cannot_load(ws: Path, cli: CLI) -> list[str]:
    write_flow(ws, "f", "from flowdrop_tui import flow\n\n@flow(\ndef main(run):\n")
    return []


def budget_exhausted(ws: Path, cli: CLI) -> list[str]:
    loop(ws)
    ran(cli, "--max-rounds", "2")  # pauses after round 2 ...
    return []  # ... and a plain run would resume it over budget


def strict_drift(ws: Path, cli: CLI) -> list[str]:
    loop(ws)
    ran(cli)
    (ws / "flows" / "f" / "flow.py").write_text(
        LOOP.replace("RESUMABLE", "True").replace("% 3", "% 4")
    )
    return ["--strict"]


def drift_warned(ws: Path, cli: CLI) -> list[str]:
    strict_drift(ws, cli)
    return []


def emptied_state(ws: Path, cli: CLI) -> list[str]:
    write_flow(
        ws,
        "f",
        """
        from flowdrop_tui import flow

        @flow(resumable=True)
        def main(run):
            for n in run.rounds():
                run.state.clear()
                return n
        """,
    )
    ran(cli)
    return []


CASES: dict[str, Setup] = {
    "5: fresh, nothing to pick up": fresh_no_runs,
    "4: the thread's latest state": thread,
    "4: not resumable is always fresh": not_resumable,
    "4: --fresh skips the thread": fresh_flag,
    "3: --from an ended run": from_ended,
    "3: --from a paused run resumes it": from_paused,
    "3: --from an unknown run": from_unknown,
    "3: --from on a flow that is not resumable": from_not_resumable,
    "3: --from a run with no state for the key": from_other_key,
    "2: --resume of nothing warns and starts fresh": resume_unknown,
    "2: --resume of an ended run": resume_ended,
    "2: --resume of a paused run": resume_paused,
    "4: the latest run is paused: it is resumed": latest_paused,
    "1: --snapshot of a finished run": snapshot_terminal,
    "1: --snapshot of a paused run": snapshot_paused,
    "1: --snapshot on a flow that is not resumable": snapshot_not_resumable,
    "INT-15: a state that cannot be read": unusable_state,
    "a live run holds the key": live_run,
    "the flow cannot be loaded": cannot_load,
    "§14: over budget": budget_exhausted,
    "§15: --strict and the flow changed": strict_drift,
    "§15: the flow changed, warned": drift_warned,
    "§5.5: the latest run emptied its state": emptied_state,
}


def run_ids(ws: Path) -> list[str]:
    folder = ws / ".flowdrop" / "runs"
    return sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []


def first_round_of(ws: Path, run_id: str, after: int) -> int | None:
    """The first round the run started after its ``after``-th event (this start's)."""
    for event in events(ws, run_id)[after:]:
        if event["event"] == "round_started":
            return int(event["round"])
    return None


@pytest.mark.parametrize("case", list(CASES))
def test_plan_says_what_run_then_does(workspace: Path, cli: CLI, case: str) -> None:
    args = CASES[case](workspace, cli)
    planned = cli("plan", "f", *args, "--json")
    plan: dict[str, Any] = orjson.loads(planned.stdout)
    before = run_ids(workspace)
    lengths = {r: len(events(workspace, r)) for r in before}

    done = cli("run", "f", *args, "--json")
    answer: dict[str, Any] = orjson.loads(done.stdout)
    refusal = plan["refusal"]
    if refusal is not None:
        assert planned.returncode == refusal["exit"]
        assert done.returncode == refusal["exit"], (case, done.stderr)
        assert answer["error"]["code"] == refusal["code"]
        assert run_ids(workspace) == before  # refused before any run exists
        assert {r: len(events(workspace, r)) for r in before} == lengths  # nothing written
        return
    assert planned.returncode == 0
    assert done.returncode == 0, (case, done.stderr)
    assert answer["warnings"][: len(plan["warnings"])] == plan["warnings"]
    if plan["start"] == "resume":
        assert answer["run"] == plan["source"]  # the paused run itself went on
        assert run_ids(workspace) == before
        resumed_at = first_round_of(workspace, answer["run"], lengths[answer["run"]])
        assert resumed_at == plan["next_round"]
    else:
        assert answer["run"] not in before
        assert answer["start"] == plan["start"]
        assert answer["picked_up_from"] == plan["source"]
        assert answer["first_round"] == plan["next_round"]
        state = orjson.loads(
            (workspace / ".flowdrop" / "runs" / answer["run"] / "state.json").read_bytes()
        )
        created = events(workspace, answer["run"])[0]
        assert created["event"] == "created"
        assert created["budget"]["carried"]["rounds"] == plan["budget"]["rounds"]["used"]
        assert set(plan["state_keys"]) <= set(state.get("f") or {})


def test_plan_text_names_the_start_and_the_refusal(workspace: Path, cli: CLI) -> None:
    loop(workspace)
    first = ran(cli)
    text = cli("plan", "f", check=0).stdout
    assert f"would pick up from run {first} (completed), round 4" in text
    assert "state keys  n" in text
    refused = cli("plan", "f", "--resume", first, check=3).stdout
    assert "refused:" in refused and "PIPELINE_TERMINAL, exit 3" in refused
