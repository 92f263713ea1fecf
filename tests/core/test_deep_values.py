"""Deep state values (issue 27, item 2; SPEC §5.3): the nesting a state may hold is one
limit, on write and on read. A value over it is refused at the key set that made it —
that key keeps its last value, every other key is saved, one warning — and the next
run picks up. Through the real engine: a flow sets the value, the next run reads it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from flowdrop_tui.core.records.flow_state.nesting import MAX_DEPTH, VALUE_DEPTH
from tests.conftest import CLI, events, write_flow

SETS = """
    from flowdrop_tui import flow

    DEPTH = {depth}

    @flow(resumable=True)
    def main(run):
        for r in run.rounds(range(1)):
            value = 0
            for _ in range(DEPTH):
                value = [value]
            run.state["before"] = 1
            run.state["deep"] = "old"
            run.state["deep"] = value
            run.state["after"] = 2
            run.state.update(also=value, plain=3)
            run.log("seen", deep_is_old=run.state["deep"] == "old", also="also" in run.state)
        return "ok"
"""

GROWS_INSIDE = """
    from flowdrop_tui import flow

    @flow(resumable=True)
    def main(run):
        for r in run.rounds(range(1)):
            held = []
            run.state["grow"] = held
            inner = held
            for _ in range(300):  # deeper in place: the mapping cannot see it
                inner.append([])
                inner = inner[0]
            run.state["n"] = 5
        return "ok"
"""


def nested(depth: int) -> Any:
    value: Any = 0
    for _ in range(depth):
        value = [value]
    return value


def only_run(ws: Path) -> str:
    runs = sorted(p.name for p in (ws / ".flowdrop" / "runs").iterdir() if p.name[0] != ".")
    return runs[-1]


def state_warnings(ws: Path, run_id: str) -> list[str]:
    return [
        e["message"]
        for e in events(ws, run_id)
        if e["event"] == "warning" and e.get("kind") == "state"
    ]


def test_one_limit_on_write_and_read() -> None:
    """A state value sits two levels down in `state.json` (`{key: {name: value}}`): the
    most a value may nest is the file's limit less those two."""
    assert VALUE_DEPTH == MAX_DEPTH - 2


@pytest.mark.parametrize("depth", [VALUE_DEPTH, 199, 200, 253, 254, 600])
def test_a_value_nested_over_the_limit_is_refused_at_its_key_set_and_the_next_run_picks_up(
    workspace: Path, cli: CLI, depth: int
) -> None:
    """Guards against a value nested 254–590 levels freezing every later save of the run
    (`TypeError: Recursion limit reached`), and one nested 200–253 levels being saved
    without a warning and then refusing the whole thread (`UNUSABLE_STATE`, exit 3)."""
    write_flow(workspace, "a", SETS.format(depth=depth))
    done = cli("run", "a", timeout=120)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    run_id = only_run(workspace)
    saved = orjson.loads((workspace / ".flowdrop" / "runs" / run_id / "state.json").read_bytes())
    seen = next(e for e in events(workspace, run_id) if e["event"] == "log")["fields"]
    warnings = state_warnings(workspace, run_id)
    if depth <= VALUE_DEPTH:  # at the limit: kept, as any value
        value = nested(depth)
        assert saved == {"a": {"before": 1, "deep": value, "after": 2, "also": value, "plain": 3}}
        assert warnings == [] and seen == {"deep_is_old": False, "also": True}
    else:  # over it: refused where it was set; the key keeps its last value
        assert saved == {"a": {"before": 1, "deep": "old", "after": 2, "plain": 3}}
        assert seen == {"deep_is_old": True, "also": False}
        assert len(warnings) == 2, warnings  # one for each key set that made one
        assert all(f"nests more than {VALUE_DEPTH} levels" in w for w in warnings)
        assert "a['deep']" in warnings[0] and "a['also']" in warnings[1]
    again = cli("run", "a", timeout=120)
    assert again.returncode == 0, again.stderr  # the thread goes on: picked up
    assert "picked up from" in again.stderr


def test_a_value_made_too_deep_in_place_keeps_its_last_save_and_the_rest_saves(
    workspace: Path, cli: CLI
) -> None:
    """A value made deeper in place (the mapping cannot see it) is caught at the next save:
    it keeps what the last save held, every other key is saved, the next run picks up."""
    write_flow(workspace, "g", GROWS_INSIDE)
    done = cli("run", "g", timeout=120)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    run_id = only_run(workspace)
    saved = orjson.loads((workspace / ".flowdrop" / "runs" / run_id / "state.json").read_bytes())
    assert saved == {"g": {"grow": [], "n": 5}}
    warnings = state_warnings(workspace, run_id)
    assert warnings and all("g['grow']" in w for w in warnings)
    assert not any("Recursion limit" in w or "not saved" in w for w in warnings)
    cli("run", "g", timeout=120, check=0)
