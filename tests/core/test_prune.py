"""``prune``, ``pin`` and ``unpin`` on real records (SPEC §16;
docs/decisions.md, "Retention (prune, pin)").

Every "never deletes" rule has a test of its own. The records are made by the real
engine once (a template workspace: four runs of ``a``, the first of which called
``inner``) and copied for each test.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import orjson
import pytest

from flowdrop_tui.core.paths import Layout
from flowdrop_tui.core.records.listing import index, key_runs
from flowdrop_tui.core.records.run_record import trash
from flowdrop_tui.core.run import start_plan
from tests.conftest import CLI, events, paused_mid_run, wait_for, write_flow

A = """
    from pathlib import Path
    from flowdrop_tui import flow

    @flow(resumable=True, description="counts, one command session per round")
    def main(run):
        s = run.state
        for r in run.rounds(range(2)):
            s["n"] = s.get("n", 0) + 1
            run.session("command", ["echo", f"n={s['n']}"])
            if r == 1 and (Path(run.workspace) / "call").exists():
                run.call("inner")
"""
INNER = """
    from flowdrop_tui import flow

    @flow(resumable=True)
    def main(run):
        run.state["m"] = run.state.get("m", 0) + 1
"""
HELD = """
    import time
    from pathlib import Path
    from flowdrop_tui import flow

    @flow(resumable=True)
    def main(run):
        for r in run.rounds():
            run.state["r"] = r
            while (Path(run.workspace) / "hold").exists():
                time.sleep(0.05)
"""


def run_ids(ws: Path) -> list[str]:
    return sorted(
        p.name for p in (ws / ".flowdrop" / "runs").iterdir() if not p.name.startswith(".")
    )


def transcripts(ws: Path) -> set[str]:
    folder = ws / ".flowdrop" / "transcripts"
    return {p.name for p in folder.iterdir()} if folder.is_dir() else set()


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Four ended runs of ``a`` (the first called ``inner``), made by the real engine."""
    ws = tmp_path_factory.mktemp("prune") / "ws"
    ws.mkdir()
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t"}
    env |= {"GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=ws, check=True, env=env)
    subprocess.run(["git", "commit", "-q", "--allow-empty", "-m", "i"], cwd=ws, check=True, env=env)
    write_flow(ws, "a", A)
    write_flow(ws, "inner", INNER)
    cli = CLI(ws)
    (ws / "call").write_text("")
    cli("run", "a", check=0)
    (ws / "call").unlink()
    for _ in range(3):
        cli("run", "a", check=0)
    return ws


@pytest.fixture
def ws(template: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "ws"
    shutil.copytree(template, copy, symlinks=True)
    return copy


def prune(cli: CLI, *args: str) -> dict[str, Any]:
    return cli.json("prune", *args)  # type: ignore[no-any-return]


def plans(ws: Path) -> dict[str, tuple[Any, ...]]:
    """What a plain run of every key in the index would do."""
    layout = Layout(ws)
    out = {}
    for key in sorted(index.load(layout)["keys"]):
        p = start_plan.plan(layout, key, resumable=True)
        out[key] = (p.start, p.source, p.source_status, p.first_round, p.state, p.resume)
    return out


def test_keep_n_deletes_older_runs_and_their_transcripts_only(ws: Path) -> None:
    """Guards the basic promise: the newest N per flow stay with their transcripts; the
    runs beyond them go, and so do the transcripts flowdrop kept for them."""
    cli = CLI(ws)
    ids = run_ids(ws)
    before = transcripts(ws)
    report = prune(cli, "--keep", "1")
    assert report["dry_run"] is False
    gone = {row["run"] for row in report["delete"]}
    assert gone == {ids[1], ids[2]}  # ids[0] is inner's pick-up source, ids[3] the newest
    assert run_ids(ws) == [ids[0], ids[3]]
    left = transcripts(ws)
    assert all(not name.startswith((ids[1], ids[2])) for name in left)
    assert {n for n in before if n.startswith((ids[0], ids[3]))} == left
    assert report["bytes"] > 0
    assert not (ws / ".flowdrop" / "trash").exists() or not os.listdir(ws / ".flowdrop" / "trash")
    # The flow's run list forgot them: `runs a` counts and pages what is left.
    assert key_runs.count(Layout(ws), "a") == 2
    assert key_runs.path_of(Layout(ws), "a").read_text().split() == [ids[0], ids[3]]


def test_the_run_a_plain_run_picks_up_is_kept_for_each_key_nested_calls_included(
    ws: Path,
) -> None:
    """Guards 'never deletes the run a plain run of each key would pick up': the first run
    of ``a`` is old, but it holds ``inner``'s latest state (a nested call)."""
    cli = CLI(ws)
    ids = run_ids(ws)
    report = prune(cli, "--keep", "0")
    assert run_ids(ws) == [ids[0], ids[3]]
    kept = {row["run"]: row for row in report["kept"]}
    assert "pick_up" in kept[ids[0]]["reasons"] and kept[ids[0]]["keys"] == ["inner"]
    assert "pick_up" in kept[ids[3]]["reasons"] and kept[ids[3]]["keys"] == ["a"]
    assert "newest" not in kept[ids[3]]["reasons"]


def test_plan_is_the_same_for_every_key_before_and_after(ws: Path) -> None:
    """Guards 'plan before == plan after': what a plain run of each key does is unchanged,
    and the index is still exactly what the records say."""
    before = plans(ws)
    assert set(before) == {"a", "inner"}
    prune(CLI(ws), "--keep", "0")
    assert plans(ws) == before
    layout = Layout(ws)
    assert index.read(layout) == index._scan(layout)


def test_a_pinned_run_survives_keep_0_and_goes_once_unpinned(ws: Path) -> None:
    """Guards 'never deletes a pinned run', and pin shown in runs and show."""
    cli = CLI(ws)
    ids = run_ids(ws)
    assert cli.json("pin", ids[1]) == {"run": ids[1], "pinned": True, "changed": True}
    assert cli.json("pin", ids[1])["changed"] is False
    assert cli.json("show", ids[1])["pinned"] is True
    assert "pinned" in cli("show", ids[1], check=0).stdout
    rows = {row["run"]: row["pinned"] for row in cli.json("runs")}
    assert rows[ids[1]] is True and rows[ids[2]] is False
    report = prune(cli, "--keep", "0")
    assert ids[1] in run_ids(ws)
    assert {row["run"]: row["reasons"] for row in report["kept"]}[ids[1]] == ["pinned"]
    assert cli.json("unpin", ids[1])["changed"] is True
    assert cli.json("show", ids[1])["pinned"] is False
    prune(cli, "--keep", "0")
    assert ids[1] not in run_ids(ws)


def test_pin_of_an_unknown_or_malformed_run_is_refused(ws: Path) -> None:
    """Guards bad input: a pin names a run that exists, never a path."""
    cli = CLI(ws)
    done = cli("pin", "20200101T000000.000Z-abcdef", "--json", check=2)
    assert orjson.loads(done.stdout)["error"]["code"]
    assert "no run" in done.stderr
    cli("pin", "../../etc", check=2)
    cli("unpin", "20200101T000000.000Z-abcdef", check=2)
    assert not (ws / ".flowdrop" / "pins").exists() or not os.listdir(ws / ".flowdrop" / "pins")


def test_a_live_run_is_never_deleted(ws: Path) -> None:
    """Guards 'never deletes a live run', even with --keep 0 and --older-than 0s."""
    cli = CLI(ws)
    write_flow(ws, "held", HELD)
    (ws / "hold").write_text("")
    live = str(cli.json("run", "held", "--detach")["run"])
    try:
        wait_for(lambda: any(e["event"] == "round_started" for e in events(ws, live)))
        report = prune(cli, "--keep", "0", "--older-than", "0s")
        assert live in run_ids(ws)
        assert "live" in {row["run"]: row["reasons"] for row in report["kept"]}[live]
    finally:
        cli("stop", live, "--now", "--wait", check=0)


def test_a_paused_run_is_never_deleted(ws: Path) -> None:
    """Guards 'never deletes a paused run': it can still be resumed."""
    cli = CLI(ws)
    paused = paused_mid_run(ws, cli, "held", HELD)
    report = prune(cli, "--keep", "0")
    assert paused in run_ids(ws)
    assert "paused" in {row["run"]: row["reasons"] for row in report["kept"]}[paused]
    cli("stop", paused, check=0)  # closed cancelled: now it is the pick-up source, still kept
    prune(cli, "--keep", "0")
    assert paused in run_ids(ws)


def test_the_newest_n_of_each_flow_are_kept(ws: Path) -> None:
    """Guards 'never deletes the newest N runs of each flow' (the run's own key)."""
    cli = CLI(ws)
    ids = run_ids(ws)
    report = prune(cli, "--keep", "3", "--dry-run")
    assert {row["run"] for row in report["delete"]} == set()
    newest = {row["run"] for row in report["kept"] if "newest" in row["reasons"]}
    assert newest == set(ids[1:])
    report = prune(cli, "--keep", "2")
    assert {row["run"] for row in report["delete"]} == {ids[1]}


def test_nothing_outside_flowdrop_is_deleted_only_our_link(ws: Path, tmp_path: Path) -> None:
    """Guards 'never deletes a file outside .flowdrop/': an agent's transcript (linked from
    sessions/ as claude and codex link theirs), a link that climbs out, and a link planted
    in transcripts/ stay pointing at files that survive."""
    ids = run_ids(ws)
    outside = tmp_path / "agent-home" / "session.jsonl"
    outside.parent.mkdir()
    outside.write_text("the agent's own transcript\n")
    sessions = ws / ".flowdrop" / "runs" / ids[1] / "sessions"
    os.symlink(outside, sessions / "000009-claude.jsonl")
    os.symlink("../../../transcripts/../../../agent-home/session.jsonl", sessions / "000010-x.log")
    planted = ws / ".flowdrop" / "transcripts" / f"{ids[2]}-000009.log"
    os.symlink(outside, planted)
    os.symlink(outside, ws / ".flowdrop" / "runs" / ids[2] / "sessions" / "000009-command.log")
    prune(CLI(ws), "--keep", "1")
    assert ids[1] not in run_ids(ws) and ids[2] not in run_ids(ws)
    assert outside.read_text() == "the agent's own transcript\n"
    assert not os.path.lexists(planted)  # our link went; its target did not


def test_orphaned_transcripts_go_and_others_stay(ws: Path) -> None:
    """Guards 'plus transcripts no run links to': named after a run that is gone, or a
    foreign name no record links to and nobody wrote for an hour; a fresh foreign one
    (a session may be about to link it) and every linked one stay."""
    folder = ws / ".flowdrop" / "transcripts"
    gone_run = folder / "20200101T000000.000Z-abcdef-000001.log"
    gone_run.write_text("x")
    old_foreign = folder / "plugin-transcript.txt"
    old_foreign.write_text("y")
    os.utime(old_foreign, (time.time() - 7200, time.time() - 7200))
    fresh_foreign = folder / "plugin-fresh.txt"
    fresh_foreign.write_text("z")
    before = transcripts(ws) - {gone_run.name, old_foreign.name, fresh_foreign.name}
    dry = prune(CLI(ws), "--keep", "20", "--dry-run")
    assert {o["transcript"] for o in dry["orphans"]} == {gone_run.name, old_foreign.name}
    assert gone_run.exists()
    report = prune(CLI(ws), "--keep", "20")
    assert report["delete"] == []
    assert {o["transcript"] for o in report["orphans"]} == {gone_run.name, old_foreign.name}
    assert transcripts(ws) == before | {fresh_foreign.name}


def test_dry_run_deletes_nothing_and_says_why_the_rest_stays(ws: Path) -> None:
    """Guards --dry-run: the same answer as the real prune, nothing touched; text says it."""
    cli = CLI(ws)
    ids = run_ids(ws)
    files = sorted(str(p) for p in (ws / ".flowdrop").rglob("*") if "cache" not in p.parts)
    dry = prune(cli, "--keep", "0", "--dry-run")
    assert dry["dry_run"] is True and dry["runs"] == 4 and dry["keep"] == 0
    assert sorted(str(p) for p in (ws / ".flowdrop").rglob("*") if "cache" not in p.parts) == files
    assert {row["run"] for row in dry["delete"]} == {ids[1], ids[2]}
    assert all(row["reasons"] for row in dry["kept"])
    text = cli("prune", "--keep", "0", "--dry-run", check=0).stdout
    assert (
        "would delete 2 of 4 runs" in text and "picked up next, last run of its key (inner)" in text
    )
    real = prune(cli, "--keep", "0")
    assert [r["run"] for r in real["delete"]] == [r["run"] for r in dry["delete"]]


def test_older_than_keeps_runs_that_ended_recently(ws: Path) -> None:
    """Guards --older-than: a run that ended within the duration stays ('recent')."""
    cli = CLI(ws)
    report = prune(cli, "--keep", "0", "--older-than", "1d12h")
    assert report["delete"] == []
    assert all("recent" in row["reasons"] for row in report["kept"])
    assert len(prune(cli, "--keep", "0", "--older-than", "0s")["delete"]) == 2


@pytest.mark.parametrize("args", [["--keep", "-1"], ["--keep", "x"], ["--older-than", "3 days"]])
def test_bad_prune_options_are_usage_errors(ws: Path, args: list[str]) -> None:
    """Guards bad input: exit 2 naming the option, nothing deleted."""
    done = CLI(ws)("prune", *args, check=2)
    assert "--keep" in done.stderr or "--older-than" in done.stderr or "number" in done.stderr
    assert len(run_ids(ws)) == 4


def test_a_prune_killed_after_the_rename_is_finished_by_reindex(ws: Path) -> None:
    """Guards crash safety: a run moved to the trash is gone for every reader at once,
    and what a kill left there (folder and transcripts) is finished by reindex."""
    layout = Layout(ws)
    ids = run_ids(ws)
    assert trash.discard(layout, ids[1])  # what prune does under the lock, then "killed"
    assert ids[1] not in run_ids(ws)
    assert ids[1] not in {row["run"] for row in CLI(ws).json("runs")}
    assert any(n.startswith(ids[1]) for n in transcripts(ws))
    CLI(ws)("reindex", check=0)
    assert not os.listdir(ws / ".flowdrop" / "trash")
    assert not any(n.startswith(ids[1]) for n in transcripts(ws))


def test_runs_starting_and_ending_during_prunes_keep_their_chain(ws: Path) -> None:
    """Guards 'a run starting while prune runs never loses its source': runs of ``a``
    start and end while prunes with --keep 0 run over and over; every run starts from
    exactly the state and round the previous one left."""
    cli = CLI(ws)
    stop = threading.Event()
    problems: list[str] = []

    def pruning() -> None:
        while not stop.is_set():
            done = cli("prune", "--keep", "0", "--json")
            if done.returncode != 0:
                problems.append(done.stderr)

    worker = threading.Thread(target=pruning)
    worker.start()
    try:
        for _ in range(6):
            cli("run", "a", check=0)
    finally:
        stop.set()
        worker.join()
    assert problems == []
    prune(cli, "--keep", "0")
    last = run_ids(ws)[-1]
    created = events(ws, last)[0]
    # Ten runs of `a`, two rounds each, one increment of n per round: nothing skipped.
    state = orjson.loads((ws / ".flowdrop" / "runs" / last / "state.json").read_bytes())
    assert state["a"]["n"] == 20 and created["first_round"] == 19


def test_prune_of_a_workspace_without_runs_says_so(tmp_path: Path) -> None:
    """Guards the first use: no .flowdrop/ yet is nothing to prune, not an error."""
    cli = CLI(tmp_path)
    report = prune(cli, "--workspace", str(tmp_path))
    assert report["runs"] == 0 and report["delete"] == [] and report["kept"] == []
    assert "deleted 0 of 0 runs" in cli("prune", "--workspace", str(tmp_path), check=0).stdout
    assert not (tmp_path / ".flowdrop").exists()


def test_a_flow_that_cannot_be_picked_up_keeps_its_latest_state_without_picked_up_next(
    workspace: Path, cli: CLI
) -> None:
    """Issue 26: prune said "picked up next" of the latest run of a flow that does not
    declare resumable (a plain run starts it fresh) and of a flow whose folder is gone.
    The run still stays (the flow may be made resumable again), said as what it is."""
    write_flow(
        workspace,
        "once",
        """
        from flowdrop_tui import flow

        @flow()
        def main(run):
            run.state["x"] = 1
        """,
    )
    write_flow(
        workspace,
        "kept",
        """
        from flowdrop_tui import flow

        @flow(resumable=True)
        def main(run):
            run.state["x"] = 1
        """,
    )
    once = [cli.json("run", "once")["run"] for _ in range(2)]
    kept = cli.json("run", "kept")["run"]
    gone = write_flow(workspace, "gone", (workspace / "flows/kept/flow.py").read_text())
    went = cli.json("run", "gone")["run"]
    shutil.rmtree(gone)
    cli.json("flows")  # the listing describes what is on disk (the cache prune reads)
    report = prune(cli, "--keep", "0", "--dry-run")
    reasons = {row["run"]: row["reasons"] for row in report["kept"]}
    assert "latest_state" in reasons[once[1]] and "pick_up" not in reasons[once[1]], reasons
    assert "latest_state" in reasons[went] and "pick_up" not in reasons[went], reasons
    assert "pick_up" in reasons[kept], reasons
    assert once[0] in {row["run"] for row in report["delete"]}
    text = cli("prune", "--keep", "0", "--dry-run", check=0).stdout
    assert "latest state (its flow cannot be picked up today)" in text, text
