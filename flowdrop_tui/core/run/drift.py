"""Drift (SPEC §15): what changed between the run being picked up or resumed and now.

Two things can move under a week-long loop between two of its runs: the flow's
own code (a digest of its folder, recorded when each run starts or resumes) and
the repository (HEAD, branch, uncommitted changes). The source run's side is
read from its record: the git facts of its end, pause or resume when it
recorded them, else of its start (a killed run recorded nothing later).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from flowdrop_tui.core import git
from flowdrop_tui.core.records.run_record.run_info import RunInfo, Status


@dataclass
class Drift:
    """What changed since ``source`` ran (``None`` where it cannot be told)."""

    source: str
    source_status: str
    flow_changed: bool | None = None  # None: the source recorded no digest
    git_from: dict[str, Any] | None = None
    git_to: dict[str, Any] | None = None
    commits: int | None = None  # commits on HEAD now that the source's HEAD lacks
    # with none: the source's commits HEAD lacks (> 0: HEAD is behind the source's, an
    # ancestor of it — a checkout not yet fetched or merged; 0: the source's commit is
    # not here, or history was rewritten)
    behind: int | None = None
    paused_at_item: int | None = None  # a paused batch's next item index

    @property
    def head_changed(self) -> bool:
        """HEAD moved; unknown (False) when either side has no git facts (a record from
        outside git, or from before they were kept)."""
        if self.git_from is None or self.git_to is None:
            return False
        return bool(_head(self.git_from) != _head(self.git_to))

    @property
    def branch_changed(self) -> bool:
        if self.git_from is None or self.git_to is None:
            return False
        return self.git_from.get("branch") != self.git_to.get("branch")

    @property
    def became_dirty(self) -> bool:
        """Uncommitted changes appeared since the source ran (clean then, dirty now).
        A tree dirty both times is shown, not counted: it cannot be compared."""
        if self.git_from is None or self.git_to is None:
            return False
        return bool(self.git_to.get("dirty")) and not self.git_from.get("dirty")

    @property
    def drifted(self) -> bool:
        return bool(
            self.flow_changed or self.head_changed or self.branch_changed or self.became_dirty
        )

    def messages(self) -> list[str]:
        """Each change in a sentence: what the warnings and ``--strict`` refusal say."""
        said: list[str] = []
        since = f"since run {self.source} ({self.source_status})"
        if self.flow_changed:
            said.append(f"the flow's code changed {since}")
            if self.paused_at_item is not None:
                said.append(
                    f"run {self.source} paused before item {self.paused_at_item} of its loop; "
                    "with the code changed, that item position may no longer match the "
                    "list (items added or removed before it are skipped or repeated)"
                )
        if self.head_changed:
            moved = f"HEAD moved {_short(self.git_from)} → {_short(self.git_to)}"
            if self.commits:
                moved += f" ({self.commits} commit{'s' if self.commits != 1 else ''} between)"
            elif self.commits == 0 and self.behind:
                moved += (
                    f" (behind: {self.behind} commit{'s' if self.behind != 1 else ''} of run "
                    f"{self.source}'s are not in this checkout; fetch and merge them to go on "
                    "from its work)"
                )
            elif self.commits == 0:
                moved += " (not a descendant: history was rewritten or another branch checked out)"
            said.append(f"{moved} {since}")
        if self.branch_changed:
            assert self.git_from is not None and self.git_to is not None
            said.append(
                f"branch changed {self.git_from.get('branch') or 'detached'} → "
                f"{self.git_to.get('branch') or 'detached'} {since}"
            )
        if self.became_dirty:
            said.append(f"the working tree has uncommitted changes it did not have {since}")
        return said

    def to_json(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "source_status": self.source_status,
            "drifted": self.drifted,
            "flow_changed": self.flow_changed,
            "git": None
            if self.git_to is None and self.git_from is None
            else {
                "from": self.git_from,
                "to": self.git_to,
                "commits": self.commits,
                "head_changed": self.head_changed,
                "branch_changed": self.branch_changed,
                "dirty": bool(self.git_to and self.git_to.get("dirty")),
                "became_dirty": self.became_dirty,
            },
            "paused_at_item": self.paused_at_item,
            "messages": self.messages(),
        }


def _head(facts: dict[str, Any] | None) -> Any:
    return facts.get("head") if facts else None


def _short(facts: dict[str, Any] | None) -> str:
    head = _head(facts)
    return str(head)[:10] if head else "no commit"


@dataclass
class GitReader:
    """How git is read: in this process, or (``isolated``, for the UI) in a child."""

    workspace: Path
    isolated: bool = False

    def facts(self) -> dict[str, Any] | None:
        if self.isolated:
            found = git.isolated(self.workspace, "facts")
            return found if isinstance(found, dict) else None
        return git.facts(self.workspace)

    def commits(self, start: str, end: str) -> int | None:
        if self.isolated:
            found = git.isolated(self.workspace, "commits", start, end)
            return len(found) if isinstance(found, list) else None
        return len(git.commits_between(self.workspace, start, end))


def drift_from(
    source: RunInfo, digest_now: str | None, reader: GitReader, now: dict[str, Any] | None
) -> Drift:
    """Compare ``source`` (the run picked up or resumed) with the flow (``digest_now``;
    ``None``: not comparable) and git ``now``."""
    drift = Drift(source=source.run, source_status=str(source.status))
    if source.flow_digest is not None and digest_now is not None:
        drift.flow_changed = source.flow_digest != digest_now
    drift.git_from = source.git_last
    drift.git_to = now
    start, end = _head(drift.git_from), _head(drift.git_to)
    if isinstance(start, str) and isinstance(end, str) and start != end:
        drift.commits = reader.commits(start, end)
        if drift.commits == 0:  # an ancestor of the source's HEAD, or not related here
            drift.behind = reader.commits(end, start)
    if source.status == Status.PAUSED and source.position.get("iterator") is not None:
        drift.paused_at_item = source.position["iterator"]
    return drift
