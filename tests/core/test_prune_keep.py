"""``prune``'s keep rule on flows with fewer runs than ``--keep`` (SPEC §16: "the
newest N runs of each flow (default 20, and all of them when it has fewer)").

The real CLI over runs the real engine made. The property test over every flow size
against every ``keep`` is in ``test_prune_property.py``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from tests.conftest import CLI, write_flow

COUNTS = """
    from flowdrop_tui import flow

    @flow(resumable=True)
    def main(run):
        run.state["n"] = run.state.get("n", 0) + 1
"""


def _runs(ws: Path) -> list[str]:
    return sorted(p.name for p in (ws / ".flowdrop" / "runs").iterdir() if p.name[0] != ".")


def _made(workspace: Path, count: int) -> tuple[CLI, list[str]]:
    write_flow(workspace, "counts", COUNTS)
    cli = CLI(workspace)
    for _ in range(count):
        cli("run", "counts", check=0)
    ids = _runs(workspace)
    assert len(ids) == count
    return cli, ids


def _newest(report: dict[str, Any]) -> set[str]:
    return {row["run"] for row in report["kept"] if "newest" in row["reasons"]}


def test_prune_with_its_defaults_keeps_all_fifteen_runs_of_a_flow(workspace: Path) -> None:
    """Guards 'all of them when it has fewer': 15 ended runs, default keep 20 (the old
    negative slice kept the newest 5 and deleted 10)."""
    cli, ids = _made(workspace, 15)
    report = cli.json("prune")
    assert report["delete"] == [] and _runs(workspace) == ids
    assert _newest(report) == set(ids)
    text = cli("prune", check=0).stdout
    assert text.startswith("deleted 0 of 15 runs"), text
    assert "kept 15 " in text, text


def test_prune_keep_5_of_a_flow_of_4_keeps_4(workspace: Path) -> None:
    cli, ids = _made(workspace, 4)
    dry = cli.json("prune", "--keep", "5", "--dry-run")
    assert dry["delete"] == [] and _newest(dry) == set(ids)
    report = cli.json("prune", "--keep", "5")
    assert report["delete"] == [] and _runs(workspace) == ids
    # and the slice is right on the other side of the flow's size too
    report = cli.json("prune", "--keep", "3")
    assert [row["run"] for row in report["delete"]] == ids[:1]
    assert _runs(workspace) == ids[1:]


BAD = "20200101T000000.000Z-abcdef"  # well formed, resolves to no run


def test_a_mistyped_resume_then_prune_keep_1_leaves_the_looked_past_run(workspace: Path) -> None:
    """Guards SPEC §7.2/§16: an unresolved --resume starts fresh (SG-12) past the key's
    head; the warning names that run and how to get its state back; prune keeps it
    (``replaced``) until --include-replaced, and its state comes back with --from."""
    cli, ids = _made(workspace, 3)
    head = ids[-1]
    started = cli("run", "counts", "--resume", BAD, check=0)
    assert f"checkpoint {BAD} resolves to no run; starting fresh" in started.stderr
    assert f"looks past run {head} (completed" in started.stderr, started.stderr
    assert f"flowdrop-tui run counts --from {head}" in started.stderr
    assert f"flowdrop-tui snapshot {head} > s.json" in started.stderr
    fresh = _runs(workspace)[-1]
    created = orjson.loads(
        (workspace / ".flowdrop/runs" / fresh / "cycle.jsonl").read_bytes().splitlines()[0]
    )
    assert created["start"] == "fresh" and created["replaced"] == head
    dry = cli.json("prune", "--keep", "1", "--dry-run")
    why = {row["run"]: row.get("reasons") for row in dry["kept"]}
    assert why[head] == ["replaced"] and dry["include_replaced"] is False
    assert {row["run"] for row in dry["delete"]} == set(ids[:2])
    assert "a fresh start looked past it" in cli("prune", "--keep", "1", "--dry-run").stdout
    cli.json("prune", "--keep", "1")
    assert _runs(workspace) == [head, fresh]
    # its state is there to go on from
    cli("run", "counts", "--from", head, check=0)
    newest = _runs(workspace)[-1]
    assert orjson.loads((workspace / ".flowdrop/runs" / newest / "state.json").read_bytes()) == {
        "counts": {"n": 4}
    }
    # picked up: nothing replaced stays for that reason any more
    gone = cli.json("prune", "--keep", "1", "--dry-run")
    assert head not in {row["run"] for row in gone["kept"] if row.get("reasons") == ["replaced"]}


def test_include_replaced_lets_the_looked_past_run_go(workspace: Path) -> None:
    cli, ids = _made(workspace, 2)
    cli("run", "counts", "--resume", BAD, check=0)
    report = cli.json("prune", "--keep", "1", "--include-replaced")
    assert report["include_replaced"] is True
    assert {row["run"] for row in report["delete"]} == set(ids)


def test_strict_refuses_an_unresolved_resume_before_any_run_exists(workspace: Path) -> None:
    """Guards SPEC §7.2: under --strict an id that resolves to nothing is refused
    CHECKPOINT_UNRESOLVED (exit 3), by run and by plan alike; without it, SG-12's
    warning and fresh start."""
    cli, ids = _made(workspace, 1)
    done = cli("run", "counts", "--resume", BAD, "--strict", "--json", check=3)
    error = orjson.loads(done.stdout)["error"]
    assert error["code"] == "CHECKPOINT_UNRESOLVED" and BAD in error["message"]
    assert _runs(workspace) == ids
    refused = cli("run", "counts", "--resume", BAD, "--strict", check=3)
    assert "refused under --strict" in refused.stderr
    plan = cli.json("plan", "counts", "--resume", BAD, "--strict", check=3)
    assert plan["refusal"]["code"] == "CHECKPOINT_UNRESOLVED" and plan["refusal"]["exit"] == 3
    plan = cli.json("plan", "counts", "--resume", BAD)
    assert plan["refusal"] is None and plan["start"] == "fresh" and plan["replaced"] == ids[0]
    assert any(f"looks past run {ids[0]}" in w for w in plan["warnings"])
    # --from an unknown run stays the error it was (exit 2), --strict or not
    assert (
        cli.json("run", "counts", "--from", BAD, "--strict", check=2)["error"]["code"]
        == "NOT_FOUND"
    )
    assert _runs(workspace) == ids


def test_forged_flow_names_in_the_cache_do_not_decide_what_goes(workspace: Path) -> None:
    """Guards SPEC §16 'the newest N runs of each flow' against a forged
    ``.flowdrop/cache/runs.json``: 6 runs each of two flows, every cached name turned
    into one flow's, then ``--keep 5`` deletes the oldest of each (2), not 7."""
    write_flow(workspace, "a", COUNTS)
    write_flow(workspace, "b", COUNTS)
    cli = CLI(workspace)
    for _ in range(6):
        cli("run", "a", check=0)
        cli("run", "b", check=0)
    ids = _runs(workspace)
    cli.json("prune", "--keep", "20", "--dry-run")  # the ledger learns every ended run
    cache = workspace / ".flowdrop" / "cache" / "runs.json"
    data = orjson.loads(cache.read_bytes())
    assert len(data["runs"]) == 12
    for facts in data["runs"].values():
        facts[0] = "a"
    cache.write_bytes(orjson.dumps(data))
    report = cli.json("prune", "--keep", "5")
    assert [row["run"] for row in report["delete"]] == ids[:2]
    assert len(report["cache_corrected"]) == 6
    assert "disagreed with their records" not in cli("prune", "--keep", "5").stdout  # relearnt
    assert {row["flow"] for row in report["kept"]} == {"a", "b"}


def test_a_folder_planted_at_a_keys_run_list_is_set_aside_and_rebuilt(workspace: Path) -> None:
    """``keys/<key>.runs`` made a folder: ``runs KEY`` said "no runs yet". It is set
    aside (renamed, nothing deleted), the list rebuilt from the records, and said."""
    cli, ids = _made(workspace, 2)
    listed = workspace / ".flowdrop" / "keys" / "counts.runs"
    assert listed.is_file()
    listed.unlink()
    listed.mkdir()
    (listed / "mine").write_text("a person's file")
    done = cli("runs", "counts", check=0)
    assert "no runs yet" not in done.stdout and all(run in done.stdout for run in ids)
    assert "was a folder, not a run list: set aside" in done.stderr, done.stderr
    assert listed.is_file()
    [aside] = [p for p in listed.parent.iterdir() if ".not-a-file-" in p.name]
    assert (aside / "mine").read_text() == "a person's file"
    assert [row["run"] for row in cli.json("runs", "counts")] == ids[::-1]
    cli("run", "counts", check=0)  # a new run appends to the rebuilt list
    assert len(cli.json("runs", "counts")) == 3


def test_a_transcripts_link_out_of_flowdrop_is_refused_before_any_run_exists(
    workspace: Path, tmp_path: Path
) -> None:
    """A link planted at ``.flowdrop/transcripts`` failed the run at its first session;
    it is refused before anything starts (RECORDS_UNWRITABLE, exit 3), naming it."""
    write_flow(
        workspace,
        "talks",
        """
        from flowdrop_tui import flow

        @flow(resumable=True)
        def main(run):
            run.state["n"] = 1
            run.session("command", ["echo", "hi"])
        """,
    )
    cli = CLI(workspace)
    cli("flows", check=0)  # .flowdrop/ exists
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (workspace / ".flowdrop" / "transcripts").symlink_to(elsewhere)
    done = cli("run", "talks", "--json", check=3)
    error = orjson.loads(done.stdout)["error"]
    assert error["code"] == "RECORDS_UNWRITABLE"
    assert str(workspace / ".flowdrop" / "transcripts") in error["message"]
    assert (
        f"a link to {elsewhere}" in error["message"] and "nothing was started" in error["message"]
    )
    assert not (workspace / ".flowdrop" / "runs").exists() or _runs(workspace) == []
    assert list(elsewhere.iterdir()) == []
    (workspace / ".flowdrop" / "transcripts").unlink()
    cli("run", "talks", check=0)
    assert len(_runs(workspace)) == 1


LOOP = """
    from flowdrop_tui import flow

    @flow(resumable=True, budget={"rounds": 3})
    def main(run):
        for n in run.rounds():
            run.state["n"] = n
"""


def test_a_snapshot_restored_keeps_its_budget_use_with_its_round_numbers(
    workspace: Path,
) -> None:
    """Guards SPEC §14/§7.1: a run paused at its rounds budget (3 of 3), its snapshot
    restored with --snapshot: the new run goes on from round 4 *and* from 3 rounds used
    — it is refused until the budget is raised, then runs only the rounds raised."""
    write_flow(workspace, "loop", LOOP)
    cli = CLI(workspace)
    cli("run", "loop", check=0)
    [paused] = _runs(workspace)
    assert cli.json("show", paused)["status"] == "paused"
    snap = cli("snapshot", paused, check=0).stdout
    assert orjson.loads(snap)["metadata"]["budgetUsed"]["rounds"] == 3
    (workspace / "s.json").write_text(snap)
    plan = cli.json("plan", "loop", "--snapshot", "s.json", check=3)
    assert plan["refusal"]["code"] == "BUDGET_EXHAUSTED"
    cli("run", "loop", "--snapshot", "s.json", check=3)
    assert _runs(workspace) == [paused]
    plan = cli.json("plan", "loop", "--snapshot", "s.json", "--max-rounds", "5")
    assert plan["next_round"] == 4 and plan["budget"]["rounds"]["used"] == 3
    done = cli.json("run", "loop", "--snapshot", "s.json", "--max-rounds", "5")
    restored = done["run"]
    rounds = [e["round"] for e in _events(workspace, restored) if e["event"] == "round_started"]
    assert rounds == [4, 5]
    assert cli.json("show", restored)["budget"]["rounds"]["used"] == 5


def _events(ws: Path, run_id: str) -> list[dict[str, Any]]:
    lines = (ws / ".flowdrop" / "runs" / run_id / "cycle.jsonl").read_bytes().splitlines()
    return [orjson.loads(line) for line in lines if line.strip()]


def test_the_looked_past_run_outlasts_prunes_after_more_runs(workspace: Path) -> None:
    """The fresh start that names the replaced run stays with it (``replacing``): were it
    deleted, the next prune would no longer know, and would let the other go."""
    cli, ids = _made(workspace, 2)
    cli("run", "counts", "--resume", BAD, check=0)
    fresh = _runs(workspace)[-1]
    cli("run", "counts", check=0)
    cli("run", "counts", check=0)
    for _ in range(2):
        report = cli.json("prune", "--keep", "1")
    left = _runs(workspace)
    assert ids[-1] in left and fresh in left
    why = {row["run"]: row.get("reasons") for row in report["kept"]}
    assert why[ids[-1]] == ["replaced"] and why[fresh] == ["replacing"]
    assert "started fresh past a run kept as replaced" in cli("prune", "--dry-run").stdout
