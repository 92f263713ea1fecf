"""The reads and their JSON shapes (SPEC §11, §14, §15, §20): `flows`, `runs`, `show`,
`plan`, `logs` and `diff` answer the same fields in local and remote mode. The key sets are
today's, held exactly: a field added to one mode only fails here."""

from __future__ import annotations

import subprocess
from typing import Any

import orjson

from tests.contract.conftest import Mode

TWO_ITEMS = """
    from flowdrop_tui import flow

    @flow(resumable=True, description="two items, then done")
    def main(run):
        for item in run.rounds(["a", "b"]):
            run.state["last"] = item
            print(f"item {item}", flush=True)
        return "done"
"""

BUDGET = {"rounds", "minutes", "tokens"}
FLOWS_ROW = {
    "name", "path", "resumable", "error", "description", "round", "last_run", "status",
    "budget", "usage", "by_path", "called_by", "lane",
}  # fmt: skip
RUNS_ROW = {
    "run", "flow", "status", "rounds", "first_round", "last_round", "started", "ended",
    "picked_up_from", "start", "duration", "budget", "usage", "pinned", "paused_by",
    "waiting", "gate",
}  # fmt: skip
DIFF = {
    "run", "round", "rounds", "start", "end", "ended", "uncommitted", "files", "patch",
    "snapshots", "skipped", "commits_only",
}  # fmt: skip
SHOW = (RUNS_ROW - {"pinned"}) | {
    "state", "state_error", "sessions", "git", "error", "result", "position", "warnings",
    "budget_reached", "called", "pid", "flow_path", "pinned", "output_tail", "output_more",
    "output_error", "limit_reached", "state_refused",
}  # fmt: skip
PLAN = {
    "flow", "start", "source", "source_status", "next_round", "item_index", "state_keys",
    "budget", "drift", "warnings", "fork", "refusal", "replaced",
}  # fmt: skip
DRIFT = {
    "source", "source_status", "drifted", "flow_changed", "git", "paused_at_item", "messages",
}  # fmt: skip


def head(mode: Mode) -> str:
    done = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=mode.ws, capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


def followed(mode: Mode, run: str) -> list[dict[str, Any]]:
    """``logs -f RUN --json`` to its end: the run's lines, then its status. It returns
    once the run has stopped and, in remote mode, once its worker has shipped its last
    output and let it go — so what is read after it is the run's final record (a
    remote run is seen ``completed`` a moment before its last lines arrive)."""
    done = mode.cli("logs", "-f", run, "--json")
    assert done.returncode == 0, (done.stdout, done.stderr)
    return [orjson.loads(line) for line in done.stdout.splitlines()]


def budget_of(answer: dict[str, Any]) -> dict[str, Any]:
    budget: dict[str, Any] = answer["budget"]
    assert set(budget) == BUDGET, budget
    for counted in budget.values():
        assert set(counted) == {"limit", "used", "left"}, counted
    return budget


def test_flows_runs_show_and_logs_of_two_runs_of_a_thread(mode: Mode) -> None:
    """Guards the listing shapes: a flow before and after its runs, two runs newest
    first (the second picked up from the first), one run in full, and its output."""
    mode.add_flow("two", TWO_ITEMS)
    [row] = mode.json("flows")
    assert set(row) == FLOWS_ROW, row
    assert row["name"] == "two" and row["path"] == "flows/two" and row["resumable"] is True
    assert row["round"] == 0 and row["last_run"] is None and row["status"] is None
    assert row["error"] is None and row["description"] == "two items, then done"
    assert budget_of(row)["rounds"] == {"limit": None, "used": 0, "left": None}

    first = mode.start("two")
    lines = [{"line": "item a"}, {"line": "item b"}]
    assert followed(mode, first) == [*lines, {"run": first, "status": "completed"}]
    second = mode.start("two", after_end=True)
    assert followed(mode, second) == [*lines, {"run": second, "status": "completed"}]
    shown = mode.show(second)

    [row] = mode.json("flows")
    assert (row["round"], row["last_run"], row["status"]) == (4, second, "completed"), row
    assert budget_of(row)["rounds"]["used"] == 4

    rows = mode.json("runs")
    assert [r["run"] for r in rows] == [second, first]  # newest first
    for r in rows:
        assert set(r) == RUNS_ROW, r
        assert r["flow"] == "two" and r["status"] == "completed" and r["pinned"] is False
        assert r["rounds"] == 2 and r["started"] and r["ended"]
    assert (rows[1]["start"], rows[1]["picked_up_from"], rows[1]["first_round"]) == (
        "fresh",
        None,
        1,
    )
    assert (rows[0]["start"], rows[0]["picked_up_from"]) == ("thread", first)
    assert (rows[0]["first_round"], rows[0]["last_round"]) == (3, 4)
    assert mode.json("runs", "two") == rows
    assert mode.json("runs", "--all") == rows

    assert set(shown) == SHOW, set(shown) ^ SHOW
    assert shown["run"] == second and shown["result"] == "done" and shown["error"] is None
    assert shown["state"] == {"two": {"last": "b"}}
    assert shown["sessions"] == [] and shown["flow_path"] == "flows/two"
    git = shown["git"]
    assert set(git) == {"start", "end", "commits"} and git["commits"] == []
    for end in ("start", "end"):
        assert git[end] == {"head": head(mode), "branch": "main", "dirty": False}, git
    assert shown["output_tail"] == ["item a", "item b"]

    logs = mode.cli("logs", second)
    assert logs.returncode == 0 and logs.stdout.splitlines() == ["item a", "item b"], logs
    told = mode.json("logs", second)
    assert set(told) == {
        "run", "status", "path", "lines", "truncated", "first_line", "more", "next_after",
    }, told  # fmt: skip
    assert (told["first_line"], told["more"], told["next_after"]) == (1, False, None)
    assert told["run"] == second and told["status"] == "completed"
    assert told["lines"] == ["item a", "item b"] and told["truncated"] is False
    assert mode.json("logs", second, "-n", "1")["lines"] == ["item b"]

    # SPEC §20: what a round changed, read through the replica and the run's commits
    assert all(r["paused_by"] is None for r in rows)
    changed = mode.json("diff", second)
    assert set(changed) == DIFF, changed
    assert (changed["run"], changed["round"], changed["rounds"]) == (second, 4, [3, 4])
    assert changed["files"] == [] and changed["patch"] == "" and changed["ended"] is True
    assert mode.json("diff", first, "--round", "1")["files"] == []
    refused = mode.json("diff", second, "--round", "1", code=2)
    assert "it ran rounds 3–4" in refused["error"]["message"], refused


def test_plan_says_what_run_would_do_or_the_refusal_it_would_meet(mode: Mode) -> None:
    """Guards `plan --json` (SPEC §15): a fresh start, then a thread picked up from the
    ended run with its drift, and a budget refusal with its code and exit status."""
    mode.add_flow("two", TWO_ITEMS)
    fresh = mode.json("plan", "two")
    assert set(fresh) == PLAN, fresh
    assert (fresh["start"], fresh["source"], fresh["next_round"]) == ("fresh", None, 1)
    assert fresh["drift"] is None and fresh["refusal"] is None and fresh["state_keys"] == []
    run = mode.start("two")
    assert followed(mode, run)[-1] == {"run": run, "status": "completed"}
    thread = mode.json("plan", "two")
    assert set(thread) == PLAN and budget_of(thread)["rounds"]["used"] == 2
    assert (thread["start"], thread["source"], thread["source_status"]) == (
        "thread",
        run,
        "completed",
    )
    assert thread["next_round"] == 3 and thread["state_keys"] == ["last"]
    drift = thread["drift"]
    assert set(drift) == DRIFT and drift["drifted"] is False and drift["messages"] == []
    assert drift["git"]["from"] == drift["git"]["to"], drift
    assert thread["refusal"] is None and thread["warnings"] == []
    assert mode.json("plan", "two", "--from", run)["start"] == "from"
    over = mode.json("plan", "two", "--max-rounds", "1", code=3)
    assert set(over) == PLAN
    assert over["budget"]["rounds"] == {"limit": 1, "used": 2, "left": 0}
    refusal = over["refusal"]
    assert set(refusal) == {"code", "message", "exit"} and refusal["exit"] == 3
    assert refusal["code"] == "BUDGET_EXHAUSTED" and "rounds budget" in refusal["message"]
    assert mode.json("plan", "two", "--fresh")["start"] == "fresh"
