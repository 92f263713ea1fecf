"""``land``'s refusals that keep a person's work (SPEC §23): ignored files in the way,
a checkout switched under it, a target that is a live lane's branch, the lane's branch
dirty in another checkout, a replay folder that cannot be made, and advice for a
replay's conflict that, followed, lets the lane land."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import orjson
import pytest

from flowdrop_tui.core.lanes.landing import fast_forward_checkout
from flowdrop_tui.core.lanes.place import lanes_dir
from flowdrop_tui.core.paths import Layout
from tests.conftest import CLI, write_flow
from tests.lanes.test_land import (
    WAITS,
    git,
    landed_events,
    lane_path,
    make_lane,
    refused,
    snapshot,
    ws,  # noqa: F401 - the fixture
)
from tests.waiting import wait_for

# A lane's run that commits an ignored file (``git add -f``), as a flow may.
FORCES = """
import subprocess
from flowdrop_tui import flow

@flow()
def main(run):
    with open("local.env", "w") as handle:
        handle.write("MY_SECRET=the-lane's\\n")
    subprocess.run(["git", "add", "-f", "local.env"], check=True)
    subprocess.run(["git", "commit", "-q", "-m", "lane's env"], check=True)
"""


def test_an_ignored_file_in_the_way_is_refused(ws: Path, cli: CLI) -> None:  # noqa: F811
    """``merge --ff-only`` overwrites an ignored file without a word: the person's
    ``local.env`` would hold the lane's content."""
    with (ws / ".gitignore").open("a") as handle:
        handle.write("*.env\n")
    git(ws, "commit", "-q", "-am", "ignore env files")
    write_flow(ws, "forcer", FORCES)
    lane = make_lane(cli, "forcer@1")
    (ws / "local.env").write_text("MY_SECRET=keep-me\n")
    message = refused(cli, ws, lane, "forcer@1", "DIRTY_TREE")
    assert "local.env" in message and str(ws) in message
    assert (ws / "local.env").read_text() == "MY_SECRET=keep-me\n"


def test_an_ignored_folder_in_the_way_is_refused(ws: Path, cli: CLI) -> None:  # noqa: F811
    """A folder where the landing writes a file: named, nothing moved."""
    lane = make_lane(cli, "worker@1")
    (ws / "from-1.txt").mkdir()
    (ws / "from-1.txt" / "mine").write_text("a person's\n")
    message = refused(cli, ws, lane, "worker@1", "DIRTY_TREE")
    assert "from-1.txt" in message


def test_a_checkout_switched_meanwhile_is_never_moved(ws: Path, cli: CLI) -> None:  # noqa: F811
    """Between reading which checkout has the target and fast-forwarding it, a person
    switched branches there: what is checked out now is left as it is."""
    lane = make_lane(cli, "worker@1")
    old = git(ws, "rev-parse", "main").strip()
    new = git(ws, "rev-parse", "flowdrop/worker/1").strip()
    git(ws, "checkout", "-q", "-b", "mine")
    before = snapshot(ws, lane)
    with pytest.raises(Exception, match="no longer has main checked out") as caught:
        fast_forward_checkout(ws, "main", old, new, None)
    assert getattr(caught.value, "code", None) == "REFUSED"
    assert snapshot(ws, lane) == before
    git(ws, "checkout", "-q", "main")
    (ws / "moved.txt").write_text("main moved\n")
    git(ws, "add", "moved.txt")
    git(ws, "commit", "-q", "-m", "main moved meanwhile")
    before = snapshot(ws, lane)
    with pytest.raises(Exception, match="no longer has main checked out"):
        fast_forward_checkout(ws, "main", old, new, None)
    assert snapshot(ws, lane) == before


def test_into_a_live_lanes_branch_is_refused(
    ws: Path,  # noqa: F811
    cli: CLI,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    release = tmp_path / "release"
    monkeypatch.setenv("LAND_RELEASE", str(release))
    write_flow(ws, "waiter", WAITS)
    lane = make_lane(cli, "worker@1")
    started = cli.json("run", "waiter@2", "--detach")
    try:
        waiting = wait_for(lambda: _worktree(ws, "waiter@2"), what="the lane's worktree")
        waiting_head = git(waiting, "rev-parse", "HEAD")
        message = refused(
            cli, ws, lane, "worker@1", "ALREADY_RUNNING", "--into", "flowdrop/waiter/2"
        )
        assert str(started["run"]) in message and "waiter@2" in message
        assert git(waiting, "rev-parse", "HEAD") == waiting_head
    finally:
        release.write_text("go")
        wait_for(lambda: cli.json("show", str(started["run"]))["status"] != "running")


def _worktree(root: Path, key: str) -> Path | None:
    try:
        return lane_path(root, key)
    except AssertionError:
        return None


def test_the_lane_branch_dirty_in_another_checkout_is_refused(
    ws: Path,  # noqa: F811
    cli: CLI,
) -> None:
    """The lane's worktree gone and its branch checked out in the workspace with an
    edit: land lands only what is committed, so it is refused."""
    lane = make_lane(cli, "worker@1")
    git(ws, "worktree", "remove", str(lane))
    git(ws, "branch", "release", "main")
    git(ws, "checkout", "-q", "flowdrop/worker/1")
    (ws / "shared.txt").write_text("a person's edit on the lane's branch\n")
    message = refused(cli, ws, ws, "worker@1", "DIRTY_TREE", "--into", "release")
    assert "shared.txt" in message and str(ws) in message


def test_a_replay_folder_that_cannot_be_made_is_one_line(ws: Path, cli: CLI) -> None:  # noqa: F811
    lane = make_lane(cli, "worker@1")
    blocker = lanes_dir(Layout(ws)) / ".landing"
    blocker.write_text("a file where the folder goes\n")
    before = snapshot(ws, lane)
    done = cli("land", "worker@1", "--rebase", "--json")
    assert done.returncode != 0 and "Traceback" not in done.stderr, done.stderr
    error = orjson.loads(done.stdout or done.stderr)["error"]
    assert error["code"] == "GIT_FAILED" and str(blocker) in error["message"]
    assert snapshot(ws, lane) == before
    assert landed_events(ws, "worker@1") == []


def test_a_replay_conflicts_advice_followed_lands(
    ws: Path,  # noqa: F811
    cli: CLI,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Merging the target into the lane would not help a replay (it replays the
    conflicting commit again): the advice is to rebase the lane, and it works."""
    monkeypatch.setenv("LAND_FILE", "shared.txt")
    monkeypatch.setenv("LAND_TEXT", "the lane's version")
    lane = make_lane(cli, "worker@1")
    (ws / "shared.txt").write_text("main's version\n")
    git(ws, "commit", "-q", "-am", "main changed it too")
    message = refused(cli, ws, lane, "worker@1", "LAND_CONFLICT", "--rebase")
    advice = f"git -C {lane} rebase main"
    assert advice in message and "--merge" in message
    rebasing = subprocess.run(
        ["git", "-C", str(lane), "rebase", "main"], capture_output=True, text=True
    )
    assert rebasing.returncode != 0  # the conflict, in the lane's own tree
    (lane / "shared.txt").write_text("both versions\n")
    git(lane, "add", "shared.txt")
    subprocess.run(
        ["git", "rebase", "--continue"],
        cwd=lane,
        check=True,
        capture_output=True,
        env={**os.environ, "GIT_EDITOR": "true"},
    )
    landed = cli.json("land", "worker@1", "--rebase")
    assert (ws / "shared.txt").read_text() == "both versions\n"
    assert git(ws, "rev-parse", "HEAD").strip() == landed["commit"]


def test_a_lane_already_running_says_one_run_per_key(
    ws: Path,  # noqa: F811
    cli: CLI,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    release = tmp_path / "release"
    monkeypatch.setenv("LAND_RELEASE", str(release))
    write_flow(ws, "waiter", WAITS)
    started = cli.json("run", "waiter@1", "--detach")
    try:
        wait_for(lambda: _worktree(ws, "waiter@1"), what="the lane's worktree")
        done = cli("run", "waiter@1", "--detach", "--json")
        error = orjson.loads(done.stdout or done.stderr)["error"]
        assert error["code"] == "ALREADY_RUNNING"
        assert "one live run per key" in error["message"]
    finally:
        release.write_text("go")
        wait_for(lambda: cli.json("show", str(started["run"]))["status"] != "running")


def test_remote_mode_refuses_a_dirty_target_before_fetching(
    ws: Path,  # noqa: F811
    cli: CLI,
    tmp_path: Path,
) -> None:
    """The origin's lane branch is ahead of the local one; the target's checkout is
    dirty: refused before the fetch, so not even the lane's local branch moves."""
    from flowdrop_tui.core.errors import DirtyTreeError
    from flowdrop_tui.core.lanes.landing import land

    lane = make_lane(cli, "worker@1")
    git(ws, "worktree", "remove", str(lane))  # a remote lane has no local worktree
    origin = tmp_path / "origin.git"
    git(tmp_path, "init", "-q", "--bare", str(origin))
    git(ws, "remote", "add", "origin", str(origin))
    git(ws, "push", "-q", "origin", "flowdrop/worker/1")
    git(ws, "branch", "-f", "flowdrop/worker/1", "flowdrop/worker/1~1")
    local = git(ws, "rev-parse", "flowdrop/worker/1")
    (ws / "shared.txt").write_text("a person's edit, not committed\n")
    with pytest.raises(DirtyTreeError, match=r"shared\.txt"):
        land(Layout(ws), "worker@1", remote=True)
    assert git(ws, "rev-parse", "flowdrop/worker/1") == local
    assert (ws / "shared.txt").read_text() == "a person's edit, not committed\n"
