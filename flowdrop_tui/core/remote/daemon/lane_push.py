"""A lane's branch pushed to the origin at each round's end, by the run child a worker
started (``LanePush``; docs/remote.md, "Lanes").

The worker checks the lane out as the commit the origin's
``refs/heads/flowdrop/<flow>/<lane>`` names (else the client's commit) and tells the
child, in ``PUSH_ENV``, the origin, the branch and what the branch was then (the
lease). The child installs ``LanePush`` as the records' round-end hook
(``core/records/mirror.py``): at each main round's end, and at the run's end, its HEAD
goes to that branch alone, ``--force-with-lease`` on what this run last saw there —
so a branch moved meanwhile by anyone else is never overwritten (the push is refused,
said on stderr, the run's ``output.log``, and tried again at the next round's end).
The run's commits are kept at ``refs/flowdrop/runs/<run>`` as well (``worktrees``).
"""

from __future__ import annotations

import contextlib
import os
import subprocess
from pathlib import Path

import orjson

from flowdrop_tui.core.lanes.place import BRANCH_PREFIX
from flowdrop_tui.core.records import mirror

PUSH_ENV = "FLOWDROP_LANE_PUSH"  # {"origin", "branch", "lease"}: "" lease, no branch yet
PUSH_TIMEOUT = 300.0


def push_env(origin: str, branch: str, lease: str | None) -> str:
    return orjson.dumps({"origin": origin, "branch": branch, "lease": lease or ""}).decode()


class LanePush:
    """The round-end hook of a lane's run on a worker: its HEAD to its branch."""

    def __init__(self, origin: str, branch: str, lease: str) -> None:
        self.origin = origin
        self.branch = branch
        self.lease = lease  # what the origin's branch was last seen to be ("": none)

    @classmethod
    def from_env(cls, value: str) -> LanePush | None:
        try:
            given = orjson.loads(value)
            origin, branch, lease = given["origin"], given["branch"], given["lease"]
        except (orjson.JSONDecodeError, KeyError, TypeError):
            return None
        if not all(isinstance(v, str) for v in (origin, branch, lease)):
            return None
        if not branch.startswith(BRANCH_PREFIX) or not origin:
            return None  # only ever a lane's own branch
        return cls(origin, branch, lease)

    def __call__(self, checkout: Path) -> None:
        try:
            self.push(checkout)
        except Exception as exc:  # a round end never fails the run
            _say(f"warning: lane branch {self.branch} not pushed to the origin: {exc}")

    def push(self, checkout: Path) -> bool:
        """Push HEAD to the branch, leased on what was last seen; False when the
        branch names HEAD already."""
        head = _git(["rev-parse", "HEAD"], checkout).stdout.strip()
        if head == self.lease:
            return False
        ref = f"refs/heads/{self.branch}"
        done = _git(
            [
                "push",
                "--quiet",
                "--porcelain",
                f"--force-with-lease={ref}:{self.lease}",
                self.origin,
                f"{head}:{ref}",
            ],
            checkout,
            check=False,
        )
        if done.returncode != 0:
            detail = (done.stderr or done.stdout).strip()[-800:]
            _say(
                f"warning: lane branch {self.branch} not pushed to the origin (it is not "
                f"where this run last saw it, {self.lease[:12] or 'absent'}: someone else "
                f"moved it); the run's commits are at its own ref: {detail}"
            )
            return False
        self.lease = head
        return True


def install_from_env() -> LanePush | None:
    """In a lane's run child on a worker: push its branch at each round's end. The
    variable is taken out of the environment, so nothing the flow starts pushes."""
    value = os.environ.pop(PUSH_ENV, "")
    if not value:
        return None
    hook = LanePush.from_env(value)
    if hook is not None:
        mirror.on_round_end(hook)
    return hook


def _git(args: list[str], cwd: Path, *, check: bool = True) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C"}
    return subprocess.run(
        ["git", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=PUSH_TIMEOUT,
        stdin=subprocess.DEVNULL,
        check=check,
    )


def _say(line: str) -> None:
    with contextlib.suppress(OSError):
        os.write(2, (line.rstrip("\n") + "\n").encode(errors="replace"))
