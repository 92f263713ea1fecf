"""``LanePush`` (docs/remote.md, "Lanes") without servers: a lane's run child pushes
its HEAD to its own branch alone, leased on what it last saw there, and never raises
into the run."""

from __future__ import annotations

from pathlib import Path

from flowdrop_tui.core.remote.daemon.lane_push import LanePush, push_env
from tests.remote.git_origin import git, make_origin

REF = "refs/heads/flowdrop/flow/1"


def test_pushes_its_branch_alone_and_leases_on_what_it_saw(tmp_path: Path) -> None:
    origin, clone = make_origin(tmp_path)
    before = git(origin, "for-each-ref", "--format=%(refname) %(objectname)")
    hook = LanePush.from_env(push_env(str(origin), "flowdrop/flow/1", None))
    assert hook is not None
    git(clone, "commit", "-q", "--allow-empty", "-m", "round 1")
    assert hook.push(clone) and git(origin, "log", "-1", "--format=%s", REF) == "round 1"
    assert not hook.push(clone)  # nothing new: no push
    after = git(origin, "for-each-ref", "--format=%(refname) %(objectname)").splitlines()
    assert [line for line in after if not line.startswith(REF)] == before.splitlines()
    # someone else moves the branch: the lease refuses, their commit stays
    other = tmp_path / "other"
    git(tmp_path, "clone", "-q", str(origin), str(other))
    git(other, "commit", "-q", "--allow-empty", "-m", "foreign")
    git(other, "push", "-q", "-f", "origin", f"HEAD:{REF}")
    git(clone, "commit", "-q", "--allow-empty", "-m", "round 2")
    assert not hook.push(clone)
    hook(clone)  # the round-end hook: said, never raised
    assert git(origin, "log", "-1", "--format=%s", REF) == "foreign"


def test_only_a_lane_branch_is_ever_taken() -> None:
    assert LanePush.from_env(push_env("/o", "main", None)) is None
    assert LanePush.from_env("not json") is None
