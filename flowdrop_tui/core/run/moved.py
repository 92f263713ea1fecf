"""SPEC §20, the run's side: what each of its rounds moved, measured as it ends.

A round's start takes HEAD (its start commit); its end takes HEAD and a digest of
the working tree (``git.worktree``: one ``git status``), a digest of the state as
the round's end saved it, each session's outcome and the progress value, and says
what differs from just before the round — the previous round's end, or for the
first round this process runs, what it measured as that round began. Outside git
only the state and the progress value are compared.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from flowdrop_tui.core import git
from flowdrop_tui.core.records.progress import COMPARED, digest, outcome_digest, value_digest

ERROR_SHOWN = 500  # characters of a failure's error text kept in the record

NOTHING = object()  # no ``run.progress`` this round


class RoundMoves:
    """Measures the rounds of one run's own flow, one process's share of them."""

    def __init__(self, workspace: Path, state_bytes: Callable[[], bytes], in_git: bool) -> None:
        self.workspace = workspace
        self._state_bytes = state_bytes
        self.in_git = in_git
        self._last: dict[str, Any] | None = None  # what the previous round's end measured
        self.progress: str | None = None  # the digest of the last progress value declared

    @property
    def compared(self) -> list[str]:
        return list(COMPARED) if self.in_git else ["state", "progress"]

    def _measure(self, status: Any = None) -> dict[str, Any]:
        if status is None and self.in_git:
            status = git.worktree_begin(self.workspace)
        found = git.worktree_read(self.workspace, status) if self.in_git else None
        head, tree, paths = found if found is not None else (None, None, None)
        return {
            "head": head,
            "tree": tree,
            "state": digest(self._state_bytes()),
            "progress": self.progress,
            "paths": paths,
        }

    def round_started(self) -> dict[str, Any]:
        """``round_started``'s fields: ``head``, the round's start commit. The first round
        this process runs is measured whole first, to be compared with at its end; its
        ``paths`` (the files differing from HEAD, and their digests) are kept too, so
        ``diff`` can tell what this round left from what was there before it."""
        if self._last is None:
            self._last = self._measure()
            return {"head": self._last["head"], "paths": self._last["paths"]}
        return {"head": git.head_now(self.workspace) if self.in_git else None}

    def round_ending(self) -> Any:
        """The round is ending: git starts looking at the tree now, while the run saves
        the state (``round_ended`` takes git's answer)."""
        return git.worktree_begin(self.workspace) if self.in_git else None

    def round_ended(
        self, sessions: list[dict[str, Any]], progress: Any, status: Any = None
    ) -> dict[str, Any]:
        """``round_ended.moved``: what the round left, what changed, how its sessions ended
        (``status``: ``round_ending``'s, when it was called)."""
        if progress is not NOTHING:
            self.progress = value_digest(progress)
        now = self._measure(status)
        before = self._last or {}
        now["changed"] = [name for name in self.compared if now.get(name) != before.get(name)]
        self._last = {k: now[k] for k in ("head", "tree", "state", "progress", "paths")}
        outcomes = []
        failed = []
        for session in sessions:
            code, error = session.get("exit_code"), session.get("error")
            outcome = outcome_digest(code, error)
            bad = code != 0 or bool(error)
            outcomes.append({"session": session.get("session"), "outcome": outcome, "failed": bad})
            if bad:
                failed.append((outcome, code, error))
        now["sessions"] = outcomes
        now["failure"] = None
        if failed:
            now["failure"] = {
                "digest": digest("\n".join(f[0] for f in failed).encode()),
                "exit_code": failed[0][1],
                "error": (failed[0][2] or "")[:ERROR_SHOWN] or None,
            }
        return now
