"""SPEC §20, the run's side: what each of its rounds moved, measured as it ends.

Every round records HEAD as it starts and as it ends (``diff`` needs its commits).
Only a round that **counts** — one that opened an agent session (``claude``,
``codex``, a plug-in backend that reported usage), or every round of a flow declared
``stall_on="all"`` — is measured further: as it ends, a digest of the working tree
(``git.worktree_scan``: one ``git status``), a snapshot of that tree (``tree_snapshots.Snapshots``:
a tree object made in a temporary index, for ``diff``), a digest of the state as the
round's end saved it and the progress value, compared with just before the round: the
previous round's end when that was measured in this process, else what was measured
as the round's first session other than ``command`` started (or, for ``all``, as the
round began). A round that does not count records HEAD only — no ``git status``, no
digest (bench/README.md, "(j)"). Every round records its sessions' outcomes:
``same_failure`` counts every session kind. Outside git only the state and the
progress value are compared.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from flowdrop_tui.core import git
from flowdrop_tui.core.paths import Layout
from flowdrop_tui.core.records.spend.progress import COMPARED, digest, outcome_digest, value_digest
from flowdrop_tui.core.tree_snapshots import Snapshots

ERROR_SHOWN = 300  # characters of a failure's words kept in the record (its tail)
SKIPPED_KEPT = 20  # big files named as left out of a snapshot, up to this many

NOTHING = object()  # no ``run.progress`` this round


class RoundMoves:
    """Measures the rounds of one run's own flow, one process's share of them."""

    def __init__(
        self,
        workspace: Path,
        state_bytes: Callable[[], bytes],
        in_git: bool,
        every_round: bool = False,
        records: Layout | None = None,
    ) -> None:
        self.workspace = workspace  # the checkout: a lane's worktree (SPEC §23)
        self.records = records or Layout(workspace)
        self._state_bytes = state_bytes
        self.in_git = in_git
        self.every_round = every_round  # ``@flow(stall_on="all")``: every round counts
        self._last: dict[str, Any] | None = None  # the previous round's end, if measured
        self._before: dict[str, Any] | None = None  # what the round in flight compares with
        self._counts = False  # the round in flight ends measured
        self.progress: str | None = None  # the digest of the last progress value declared
        self._snapshots: Snapshots | None = None  # made at the first snapshot
        self._snapshot: str | None = None  # the last snapshot made, and of what
        self._snapshot_of: tuple[str | None, str] | None = None

    @property
    def compared(self) -> list[str]:
        return list(COMPARED) if self.in_git else ["state", "progress"]

    def _measure(self, status: Any = None) -> dict[str, Any]:
        if status is None and self.in_git:
            status = git.worktree_begin(self.workspace)
        scan = git.worktree_scan(self.workspace, status) if self.in_git else None
        tree = None
        if scan is not None:
            # the same HEAD and the same status records (with the listed files' content
            # digests) are the same tree: a round that changed nothing makes no snapshot
            seen = (scan.head, scan.tree)
            if seen != self._snapshot_of:
                if self._snapshots is None:
                    self._snapshots = Snapshots(self.workspace, self._snapshot_folder())
                self._snapshot = self._snapshots.take(scan)
                self._snapshot_of = seen if self._snapshot is not None else None
            tree = self._snapshot
        return {
            "head": scan.head if scan is not None else None,
            "tree": scan.tree if scan is not None else None,
            "state": digest(self._state_bytes()),
            "progress": self.progress,
            "snapshot": tree,
            "skipped": scan.skipped[:SKIPPED_KEPT] if scan is not None else [],
        }

    def _snapshot_folder(self) -> Path | None:
        """``.flowdrop/cache/snapshots``: in the workspace, so a copy a killed run leaves
        is found and removed by the next run; ``None`` when it cannot be made."""
        layout = self.records
        try:
            return layout.folder(layout.cache / "snapshots")
        except OSError:  # a link planted there is refused as one too
            return None

    def close(self) -> None:
        """The run's process is done with its rounds: its snapshots' index goes (the
        process may leave by ``os._exit``, which runs no finalizer)."""
        if self._snapshots is not None:
            self._snapshots.close()

    def round_started(self) -> dict[str, Any]:
        """``round_started``'s fields: ``head``, the round's start commit (read from git's
        files: no process). With ``stall_on="all"`` the first round this process runs is
        measured whole first, to be compared with at its end."""
        self._counts = False
        self._before = self._last
        if self.every_round and self._before is None:
            self._before = self._measure()
        return {"head": git.head_now(self.workspace) if self.in_git else None}

    def session_starting(self, backend: str) -> None:
        """A session is starting in the round in flight: one that may count (any backend
        but ``command``) is compared with the tree as it was just before it, unless the
        round already has what it compares with."""
        if backend != "command" and self._before is None:
            self._before = self._measure()

    def round_ending(self, sessions: list[dict[str, Any]]) -> Any:
        """The round is ending: whether it counts, and if it does git starts looking at
        the tree now, while the run saves the state (``round_ended`` takes git's answer)."""
        self._counts = self.every_round or any(s.get("agent") for s in sessions)
        return git.worktree_begin(self.workspace) if self._counts and self.in_git else None

    def round_ended(
        self, sessions: list[dict[str, Any]], progress: Any, status: Any = None
    ) -> dict[str, Any]:
        """``round_ended.moved``: how its sessions ended, and for a round that counts what
        it left and what changed (``status``: ``round_ending``'s, when it was called)."""
        if progress is not NOTHING:
            self.progress = value_digest(progress)
        now: dict[str, Any]
        if self._counts:
            now = self._measure(status)
            before = self._before
            now["snapshot"] = {
                "start": before.get("snapshot") if before is not None else None,
                "end": now["snapshot"],
            }
            # nothing to compare with (a session that started outside the round's
            # bookkeeping): counted as a change, never as a round that stood still
            now["changed"] = (
                [name for name in self.compared if now.get(name) != before.get(name)]
                if before is not None
                else list(self.compared)
            )
            now["counted"] = True
            self._last = {**now, "snapshot": now["snapshot"]["end"]}
        else:
            head = git.head_now(self.workspace) if self.in_git else None
            now = {"head": head, "counted": False}
            self._last = None  # the next round measures from its own start
        self._before, self._counts = None, False
        outcomes = []
        failed = []
        for session in sessions:
            code, error = session.get("exit_code"), session.get("error")
            outcome = outcome_digest(code, error)  # the error text, never the output
            bad = code != 0 or bool(error)
            outcomes.append({"session": session.get("session"), "outcome": outcome, "failed": bad})
            if bad:
                failed.append((outcome, code, error or session.get("tail")))
        now["sessions"] = outcomes
        now["failure"] = None
        if failed:
            # the last failed session names the failure: its error text, else the tail of
            # what it printed (a `make check`'s own words), so a person sees why it paused
            said = " ".join(str(failed[-1][2] or "").split())
            now["failure"] = {
                "digest": digest("\n".join(f[0] for f in failed).encode()),
                "exit_code": failed[-1][1],
                "error": said[-ERROR_SHOWN:] or None,
            }
        return now
