"""``flowdrop-tui land FLOW@LANE`` (SPEC §23, "Landing is explicit"): real repositories,
lanes made by really running ``run FLOW@1``, and every refusal checked to change
nothing — no ref, no index, no file of the target's checkout or of the lane."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import orjson
import pytest

from flowdrop_tui.core.lanes import lane_log
from flowdrop_tui.core.paths import Layout
from tests.conftest import CLI, write_flow
from tests.waiting import wait_for

# A lane's run: writes its file (named by the key's lane) and commits it in its worktree.
COMMITS = """
import os, subprocess
from flowdrop_tui import flow

@flow()
def main(run):
    name = os.environ.get("LAND_FILE") or "from-" + run.key.split("@")[1] + ".txt"
    with open(name, "w") as handle:
        handle.write(os.environ.get("LAND_TEXT", "work of " + run.key) + "\\n")
    subprocess.run(["git", "add", "-A"], check=True)
    subprocess.run(["git", "commit", "-q", "-m", "lane work: " + name], check=True)
    with open("second.txt", "w") as handle:
        handle.write("more of " + run.key + "\\n")
    subprocess.run(["git", "add", "-A"], check=True)
    subprocess.run(["git", "commit", "-q", "-m", "lane work, more"], check=True)
"""

# A lane's run that waits, live, until the file it names appears.
WAITS = """
import os, time
from flowdrop_tui import flow

@flow()
def main(run):
    while not os.path.exists(os.environ["LAND_RELEASE"]):
        time.sleep(0.05)
"""

NOTHING = """
from flowdrop_tui import flow

@flow()
def main(run):
    return "did nothing"
"""


@pytest.fixture
def ws(workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The workspace with a tracked file, git's identity and a data home in tmp_path."""
    lane_env(monkeypatch, tmp_path)
    (workspace / ".gitignore").write_text(".flowdrop/\nflows/\n")
    (workspace / "shared.txt").write_text("as it began\n")
    git(workspace, "add", "-A")
    git(workspace, "commit", "-q", "-m", "a file to change")
    write_flow(workspace, "worker", COMMITS)
    return workspace


def lane_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Lanes' worktrees under tmp_path, and git's identity for the lanes' commits."""
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    for who in ("AUTHOR", "COMMITTER"):
        monkeypatch.setenv(f"GIT_{who}_NAME", "t")
        monkeypatch.setenv(f"GIT_{who}_EMAIL", "t@t")


def git(cwd: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True)
    return done.stdout


def lane_path(ws: Path, key: str) -> Path:
    """The lane's worktree, as git lists it (its branch named by the key)."""
    flow, lane = key.split("@")
    for block in git(ws, "worktree", "list", "--porcelain").split("\n\n"):
        if f"branch refs/heads/flowdrop/{flow}/{lane}" in block:
            return Path(block.splitlines()[0].split(" ", 1)[1])
    raise AssertionError(f"no worktree of {key}")


def make_lane(cli: CLI, key: str) -> Path:
    cli("run", key, check=0)
    return lane_path(cli.ws, key)


def snapshot(ws: Path, lane: Path) -> dict[str, Any]:
    """Everything a refusal must leave as it was."""

    def files(root: Path) -> dict[str, bytes]:
        return {
            str(p.relative_to(root)): p.read_bytes()
            for p in sorted(root.rglob("*"))
            if p.is_file() and ".git" not in p.parts and ".flowdrop" not in p.parts
        }

    return {
        "refs": git(ws, "for-each-ref", "--format=%(refname) %(objectname)"),
        "status": git(ws, "status", "--porcelain"),
        "lane_status": git(lane, "status", "--porcelain"),
        "head": git(ws, "rev-parse", "HEAD"),
        "lane_head": git(lane, "rev-parse", "HEAD"),
        "worktrees": git(ws, "worktree", "list", "--porcelain"),
        "files": files(ws),
        "lane_files": files(lane),
    }


def landed_events(ws: Path, key: str) -> list[dict[str, Any]]:
    """The lane's own log, as ``lanes`` reads it."""
    return lane_log.events(Layout(ws), key)


@pytest.mark.parametrize("method", ["merge", "squash", "rebase"])
def test_each_method_lands_and_the_checkout_matches(ws: Path, cli: CLI, method: str) -> None:
    """A landing that moved the branch but left the person's checkout behind (or the
    index stale) would show the lane's work as undone changes."""
    lane = make_lane(cli, "worker@1")
    lane_head = git(lane, "rev-parse", "HEAD")
    before = git(ws, "rev-parse", "HEAD").strip()
    done = cli("land", "worker@1", f"--{method}", check=0)
    head = git(ws, "rev-parse", "HEAD").strip()
    assert head[:12] in done.stdout and "worker@1" in done.stdout and "main" in done.stdout
    assert (ws / "from-1.txt").read_text() == "work of worker@1\n"
    assert (ws / "second.txt").read_text() == "more of worker@1\n"
    assert git(ws, "status", "--porcelain", "--untracked-files=no") == ""
    parents = git(ws, "log", "-1", "--format=%P", "HEAD").split()
    if method == "merge":
        assert parents == [before, lane_head.strip()]
    elif method == "squash":
        assert parents == [before]
        assert "worker@1" in git(ws, "log", "-1", "--format=%B", "HEAD")
    else:
        subjects = git(ws, "log", "--format=%s", f"{before}..HEAD").splitlines()
        assert subjects == ["lane work, more", "lane work: from-1.txt"]
    assert git(lane, "rev-parse", "HEAD") == lane_head  # the lane's branch never moves
    assert git(ws, "worktree", "list").count("\n") == 2  # no temporary worktree left
    (event,) = landed_events(ws, "worker@1")
    assert event["event"] == "landed"
    assert (event["into"], event["method"], event["commit"]) == ("main", method, head)


def test_into_a_branch_checked_out_nowhere_touches_no_checkout(ws: Path, cli: CLI) -> None:
    """``--into`` a branch no worktree has: only that ref moves; the workspace's files,
    index and HEAD stay exactly as they were."""
    git(ws, "branch", "release")
    lane = make_lane(cli, "worker@1")
    before = snapshot(ws, lane)
    landed = cli.json("land", "worker@1", "--into", "release")
    after = snapshot(ws, lane)
    assert landed == {
        "lane": "worker@1",
        "into": "release",
        "method": "merge",
        "commit": git(ws, "rev-parse", "release").strip(),
    }
    assert git(ws, "show", "release:from-1.txt") == "work of worker@1\n"
    assert {k: v for k, v in after.items() if k != "refs"} == {
        k: v for k, v in before.items() if k != "refs"
    }


def test_json_shape(ws: Path, cli: CLI) -> None:
    make_lane(cli, "worker@1")
    landed = cli.json("land", "worker@1", "--squash")
    assert set(landed) == {"lane", "into", "method", "commit"}
    assert landed["method"] == "squash" and landed["into"] == "main"
    assert landed["commit"] == git(ws, "rev-parse", "HEAD").strip()


def refused(cli: CLI, ws: Path, lane: Path, key: str, code: str, *extra: str) -> str:
    """``land`` refused with ``code``, exit 3, and nothing at all changed; its message."""
    before = snapshot(ws, lane)
    done = cli("land", key, *extra, "--json")
    assert done.returncode == 3, (done.stdout, done.stderr)
    error = orjson.loads(done.stdout or done.stderr)["error"]
    assert error["code"] == code
    assert snapshot(ws, lane) == before
    assert landed_events(ws, key) == []
    return str(error["message"])


def test_a_dirty_target_checkout_is_refused(ws: Path, cli: CLI) -> None:
    lane = make_lane(cli, "worker@1")
    (ws / "shared.txt").write_text("a person's edit, not committed\n")
    message = refused(cli, ws, lane, "worker@1", "DIRTY_TREE")
    assert str(ws) in message and "shared.txt" in message


def test_a_dirty_lane_tree_is_refused(ws: Path, cli: CLI) -> None:
    lane = make_lane(cli, "worker@1")
    (lane / "shared.txt").write_text("the lane's edit, not committed\n")
    message = refused(cli, ws, lane, "worker@1", "DIRTY_TREE")
    assert "--archive" in message and "shared.txt" in message


def test_a_conflict_is_refused_naming_the_file(ws: Path, cli: CLI, monkeypatch) -> None:
    """Both changed one file: LAND_CONFLICT names it, for every method, and nothing —
    no half-made merge, no MERGE_HEAD, no replay worktree — is left."""
    monkeypatch.setenv("LAND_FILE", "shared.txt")
    monkeypatch.setenv("LAND_TEXT", "the lane's version")
    lane = make_lane(cli, "worker@1")
    (ws / "shared.txt").write_text("main's version\n")
    git(ws, "commit", "-q", "-am", "main changed it too")
    for method in ("merge", "squash", "rebase"):
        message = refused(cli, ws, lane, "worker@1", "LAND_CONFLICT", f"--{method}")
        assert "shared.txt" in message
    assert not (ws / ".git" / "MERGE_HEAD").exists()


def test_a_live_lane_run_is_refused(ws: Path, cli: CLI, tmp_path: Path, monkeypatch) -> None:
    release = tmp_path / "release"
    monkeypatch.setenv("LAND_RELEASE", str(release))
    write_flow(ws, "waiter", WAITS)
    started = cli.json("run", "waiter@1", "--detach")
    lane = wait_for(lambda: _worktree(ws, "waiter@1"), what="the lane's worktree")
    message = refused(cli, ws, lane, "waiter@1", "ALREADY_RUNNING")
    assert str(started["run"]) in message and f"flowdrop-tui stop {started['run']}" in message
    release.write_text("go")
    wait_for(lambda: cli.json("show", str(started["run"]))["status"] != "running")


def _worktree(ws: Path, key: str) -> Path | None:
    try:
        return lane_path(ws, key)
    except AssertionError:
        return None


def test_a_missing_lane_is_not_found(ws: Path, cli: CLI) -> None:
    before = git(ws, "for-each-ref")
    done = cli("land", "worker@9", "--json")
    assert done.returncode == 2
    error = orjson.loads(done.stdout or done.stderr)["error"]
    assert error["code"] == "NOT_FOUND" and "flowdrop-tui lanes" in error["message"]
    assert git(ws, "for-each-ref") == before


def test_a_lane_with_nothing_to_land_is_refused(ws: Path, cli: CLI) -> None:
    """No empty merge or squash commit for a lane that committed nothing."""
    write_flow(ws, "idle", NOTHING)
    lane = make_lane(cli, "idle@1")
    message = refused(cli, ws, lane, "idle@1", "REFUSED")
    assert "nothing to land" in message


def test_a_missing_target_branch_is_not_found(ws: Path, cli: CLI) -> None:
    lane = make_lane(cli, "worker@1")
    before = snapshot(ws, lane)
    done = cli("land", "worker@1", "--into", "nowhere", "--json")
    assert done.returncode == 2
    assert orjson.loads(done.stdout or done.stderr)["error"]["code"] == "NOT_FOUND"
    assert snapshot(ws, lane) == before


def test_methods_are_exclusive(ws: Path, cli: CLI) -> None:
    assert cli("land", "worker@1", "--merge", "--squash").returncode == 2


def test_a_target_checked_out_in_another_worktree_is_landed_there(
    ws: Path, cli: CLI, tmp_path: Path
) -> None:
    """The checkout that has the target is the one brought to the new commit — not the
    workspace, which has another branch."""
    release = tmp_path / "release"
    git(ws, "worktree", "add", "-q", "-b", "release", str(release))
    lane = make_lane(cli, "worker@1")
    kept = ("status", "lane_status", "head", "lane_head", "files", "lane_files")
    main_before = {k: v for k, v in snapshot(ws, lane).items() if k in kept}
    landed = cli.json("land", "worker@1", "--into", "release", "--rebase")
    assert git(release, "rev-parse", "HEAD").strip() == landed["commit"]
    assert (release / "from-1.txt").read_text() == "work of worker@1\n"
    assert git(release, "status", "--porcelain") == ""
    main_after = {k: v for k, v in snapshot(ws, lane).items() if k in kept}
    assert main_after == main_before


def test_an_untracked_file_in_the_way_is_refused(ws: Path, cli: CLI) -> None:
    """A file the landing would write, untracked in the target's checkout: refused
    before any file or ref moves (git checks every file before it writes one)."""
    lane = make_lane(cli, "worker@1")
    (ws / "from-1.txt").write_text("a person's own file\n")
    message = refused(cli, ws, lane, "worker@1", "DIRTY_TREE")
    assert "from-1.txt" in message
    assert (ws / "from-1.txt").read_text() == "a person's own file\n"


def test_a_lane_made_from_a_detached_head_asks_for_into(ws: Path, cli: CLI) -> None:
    git(ws, "checkout", "-q", "--detach")
    lane = make_lane(cli, "worker@1")
    before = snapshot(ws, lane)
    done = cli("land", "worker@1", "--json")
    assert done.returncode == 2
    error = orjson.loads(done.stdout or done.stderr)["error"]
    assert error["code"] == "USAGE" and "--into" in error["message"]
    assert snapshot(ws, lane) == before


def test_rebase_never_moves_the_lane_branch(ws: Path, cli: CLI) -> None:
    """Its worktree gone and ``rebase.updateRefs`` set: a replay that followed the
    person's config would move the lane's branch onto the replayed commits."""
    lane = make_lane(cli, "worker@1")
    tip = git(ws, "rev-parse", "flowdrop/worker/1")
    git(ws, "worktree", "remove", str(lane))
    git(ws, "config", "rebase.updateRefs", "true")
    (ws / "elsewhere.txt").write_text("main moved on\n")
    git(ws, "add", "elsewhere.txt")
    git(ws, "commit", "-q", "-m", "main moved on")  # so the replay makes new commits
    landed = cli.json("land", "worker@1", "--rebase")
    assert git(ws, "rev-parse", "flowdrop/worker/1") == tip
    assert git(ws, "rev-parse", "HEAD").strip() == landed["commit"] != tip.strip()
