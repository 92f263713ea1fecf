"""A lane's branch brought from the origin before it is landed (SPEC §23, remote mode).

In remote mode a lane runs on a worker, which pushes the lane's branch to the origin
(``refs/heads/flowdrop/<flow>/<lane>``) at each round's end; a client's checkout has
it only once fetched. ``fetch_lane`` fetches that one branch into the same local
branch, under the lanes lock, fast-forward only: a local branch with commits the
origin's lacks is refused (``GitError``), never overwritten. Locally (``remote``
false), or in a workspace with no ``origin``, or while the origin has no such branch
(no round of the lane has ended yet), it does nothing.
"""

from __future__ import annotations

from flowdrop_tui.core.errors import GitError
from flowdrop_tui.core.lanes import git_lock
from flowdrop_tui.core.lanes.place import BRANCH_PREFIX, Lane
from flowdrop_tui.core.paths import Layout

ORIGIN = "origin"


def fetch_lane(
    layout: Layout, lane: Lane, *, remote: bool, lock_fd: int | None = None
) -> str | None:
    """Fetch ``lane``'s branch from the origin (in remote mode: ``remote``, from the
    mode seam, ``core/mode.py``); the commit it names now, or ``None`` when nothing was
    fetched. ``lock_fd``: the lanes lock when the caller holds it already."""
    if not remote or not lane.branch.startswith(BRANCH_PREFIX):
        return None
    if lock_fd is not None:
        return _fetch(layout, lane, lock_fd)
    with git_lock.held(layout) as fd:
        return _fetch(layout, lane, fd)


def _fetch(layout: Layout, lane: Lane, fd: int) -> str | None:
    has_origin = git_lock.run(
        None,
        ["remote", "get-url", ORIGIN],
        cwd=layout.workspace,
        what="find the origin",
        check=False,
    )
    if has_origin.returncode != 0:
        return None
    ref = f"refs/heads/{lane.branch}"
    done = git_lock.run(
        fd,
        ["fetch", "--quiet", "--no-tags", ORIGIN, f"{ref}:{ref}"],
        cwd=layout.workspace,
        what=f"fetch lane {lane.key}'s branch",
        check=False,
    )
    if done.returncode != 0:
        message = (done.stderr or done.stdout).strip()
        if "couldn't find remote ref" in message:
            return None  # no round of the lane has ended on a worker yet
        raise GitError(
            f"could not fetch lane {lane.key}'s branch {lane.branch} from the origin "
            f"(fast-forward only: a local {lane.branch} with commits of its own is never "
            f"overwritten): {message[-800:]}"
        )
    head = git_lock.run(
        None, ["rev-parse", "--verify", ref], cwd=layout.workspace, what=f"read {ref}"
    )
    return head.stdout.strip()
