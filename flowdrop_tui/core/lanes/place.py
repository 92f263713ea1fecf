"""A lane's facts (SPEC §23): its key, branch, worktree and the commit it started from.

One scheme, recorded: the worktree lives outside the workspace (so tools that walk the
repository never descend into it), under ``[lanes] dir`` of ``.flowdrop/config.toml``
(default ``$XDG_DATA_HOME/flowdrop-tui/lanes/<workspace name>-<digest>``), at
``<flow>/<lane>``; its branch is ``flowdrop/<flow>/<lane>``, made from the commit the
workspace's HEAD was at. All of it goes into the lane's first run's ``created`` event
(``Lane.to_record``); every later command reads it from there (``known.lane_of``)."""

from __future__ import annotations

import hashlib
import os
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from flowdrop_tui.core.errors import UsageError
from flowdrop_tui.core.paths import Layout, key_filename, split_lane, validate_lane

BRANCH_PREFIX = "flowdrop/"
# Set by a remote worker for the run child it starts: the branch of the lane whose
# commit that child's checkout already is (its own worktree, at the lane's tip), so the
# run makes no second worktree there (docs/remote.md, "Lanes").
CHECKED_OUT_ENV = "FLOWDROP_LANE_CHECKED_OUT"
_UNSAFE = re.compile(r"[^A-Za-z0-9._/-]+")
_SHA = re.compile(r"[0-9a-f]{40,64}")


@dataclass(frozen=True)
class Lane:
    """One lane as its record says it was made."""

    key: str  # fixer@2
    flow_key: str  # fixer
    name: str  # 2
    branch: str  # flowdrop/fixer/2
    path: Path  # its worktree, outside the workspace
    base: str | None  # the commit its branch was made from (None: an empty repository)
    base_branch: str | None  # the branch checked out then: where `land` goes by default

    def to_record(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "flow_key": self.flow_key,
            "branch": self.branch,
            "path": str(self.path),
            "base": self.base,
            "base_branch": self.base_branch,
        }

    @classmethod
    def from_record(cls, key: str, data: Any) -> Lane | None:
        """The lane a ``created`` event's ``lane`` field describes; ``None`` when it is
        not one this engine wrote for ``key`` (a damaged or forged field is never used
        as a path or a branch)."""
        if not isinstance(data, dict):
            return None
        flow_key, name = split_lane(key)
        branch, path = data.get("branch"), data.get("path")
        base, base_branch = data.get("base"), data.get("base_branch")
        if (
            name is None
            or data.get("name") != name
            or data.get("flow_key") != flow_key
            or branch != branch_for(flow_key, name)
            or not isinstance(path, str)
            or not os.path.isabs(path)
            or not (
                base is None or (isinstance(base, str) and re.fullmatch(r"[0-9a-f]{40,64}", base))
            )
            or not (base_branch is None or isinstance(base_branch, str))
        ):
            return None
        return cls(key, flow_key, name, branch, Path(path), base, base_branch)


def branch_for(flow_key: str, lane: str) -> str:
    """``flowdrop/<flow>/<lane>``; a flow name git would not take in a branch (a space,
    a ``~``, ``..``, a part ending ``.lock``, a part past 100 bytes) is spelled safely,
    with a digest so two names never share a branch."""
    validate_lane(lane)
    safe = _UNSAFE.sub("-", flow_key).strip("/.-") or "flow"
    safe = re.sub(r"\.{2,}", ".", safe)
    parts = []
    for part in safe.split("/"):
        part = part.lstrip(".") or "_"
        part = part[:100].rstrip(".")
        parts.append(part + "-" if part.endswith(".lock") or not part else part)
    safe = "/".join(parts)
    if safe != flow_key:
        digest = hashlib.sha256(flow_key.encode(errors="surrogatepass")).hexdigest()[:8]
        safe = f"{safe}-{digest}"
    return f"{BRANCH_PREFIX}{safe}/{lane}"


def lanes_dir(layout: Layout) -> Path:
    """Where this workspace's lane worktrees go: ``[lanes] dir`` (relative: to the
    workspace), else a folder of the user's data home; never inside the workspace."""
    configured = _configured_dir(layout)
    workspace = Path(os.path.realpath(layout.workspace))
    if configured is None:
        home = os.environ.get("XDG_DATA_HOME") or ""
        if not os.path.isabs(home):  # the XDG rule: a relative one is ignored
            home = os.path.join(os.path.expanduser("~"), ".local", "share")
        digest = hashlib.sha256(os.fsencode(workspace)).hexdigest()[:10]
        where = Path(os.path.realpath(home)) / "flowdrop-tui" / "lanes"
        where = where / f"{workspace.name or 'root'}-{digest}"
        said = f"the default lanes dir {where} (under XDG_DATA_HOME or ~/.local/share)"
    else:
        where = Path(os.path.realpath(workspace / Path(configured).expanduser()))
        said = f"[lanes] dir = {configured!r} in {layout.config}"
    if where == workspace or workspace in where.parents:
        raise UsageError(
            f"{said} is inside the workspace; a lane's worktree must live outside it "
            "(tools that walk the repository would descend into it) — set [lanes] dir "
            f"in {layout.config} to a folder outside, e.g. '../lanes'"
        )
    return where


def _configured_dir(layout: Layout) -> str | None:
    try:
        with open(layout.config, "rb") as handle:
            table = tomllib.load(handle).get("lanes")
    except FileNotFoundError:
        return None
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise UsageError(f"cannot read {layout.config}: {exc}") from None
    if table is None:
        return None
    value = table.get("dir") if isinstance(table, dict) else None
    if not isinstance(value, str) or not value.strip():
        raise UsageError(f"[lanes] dir in {layout.config} must be a folder's path (a string)")
    return value


def worktree_for(layout: Layout, flow_key: str, lane: str) -> Path:
    """The new lane's worktree: ``<lanes dir>/<flow>/<lane>``, the flow's key as one
    folder name, percent-encoded (``flows/tick`` → ``flows%2Ftick``): two keys never
    share a folder (``key_filename``)."""
    return lanes_dir(layout) / key_filename(flow_key) / validate_lane(lane)


def checked_out_here(lane: Lane) -> bool:
    """Whether this process's checkout is ``lane``'s already (a run on a remote worker:
    ``CHECKED_OUT_ENV``): its run works there, never in a worktree of its own."""
    return os.environ.get(CHECKED_OUT_ENV) == lane.branch
