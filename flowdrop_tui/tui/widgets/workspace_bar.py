"""The top line: which workspace this is, which store it shows (remote mode), and
whether it is a git repository."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.widgets import Static

from flowdrop_tui.format import usage_words
from flowdrop_tui.tui.widgets.status import queued


class WorkspaceBar(Static):
    """``flowdrop-tui · ws · 2 running: a, b · 1 paused: c · git main`` — the folder name,
    not its path; what is still running comes before git, so a narrow screen cuts git.
    In remote mode the store comes right after the name: ``remote: team @ db:5432``."""

    def __init__(self, name: str, store: str = "") -> None:
        super().__init__(id="workspace-bar", markup=False)
        self.workspace_name = name
        self.store_text = store
        self.git_text = "reading git…"
        self.usage_text = ""
        self.summary = ""

    def show_summary(
        self, running: list[str], paused: list[str], queued: list[str] | None = None
    ) -> None:
        """The flows whose last run is live, those whose last run is paused, and those
        whose start waits for a worker (remote mode: ``queued_names``)."""
        waiting = ("queued, waiting for a worker", queued or [])
        parts = [
            f"{len(names)} {what}: {', '.join(names)}"
            for what, names in (("running", running), ("paused", paused), waiting)
            if names
        ]
        summary = " · ".join(parts) if parts else "nothing running"
        if summary != self.summary:
            self.summary = summary
            self._redraw()

    def on_mount(self) -> None:
        self._redraw()

    def show_git(self, git: dict[str, Any] | None) -> None:
        if git is None:
            self.git_text = "not a git repository: runs record no commits"
        else:
            branch = git.get("branch") or "detached HEAD"
            self.git_text = f"git {branch}" + (" (uncommitted changes)" if git.get("dirty") else "")
        self._redraw()

    def show_usage(self, runs: int, used: int) -> None:
        """Runs and disk used: so the user knows when to prune."""
        self.usage_text = usage_words(runs, used)
        self._redraw()

    def _redraw(self) -> None:
        parts = [
            "flowdrop-tui",
            self.workspace_name,
            self.store_text,
            self.summary,
            self.git_text,
            self.usage_text,
        ]
        self.update(Text(" · ".join(part for part in parts if part)))


def queued_names(rows: dict[str, dict[str, Any]]) -> list[str]:
    """The flows (of ``rows``, by name) whose start waits for a worker."""
    return [name for name, row in rows.items() if queued(row)]
