"""The selected run in full: what it is, its state (and what changed since the run it
was picked up from), its sessions with link health, and the git commits it made."""

from __future__ import annotations

from typing import Any, ClassVar

import orjson
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import Static

from flowdrop_tui.core.records.events import RunInfo
from flowdrop_tui.format import (
    budget_reached_words,
    budget_words,
    duration,
    error_words,
    start_words,
    usage_short,
    usage_text,
)
from flowdrop_tui.tui.labels import rounds_label, stamp
from flowdrop_tui.tui.widgets.status import STATUS_CLASSES, status_text


def _short(value: Any, width: int = 40) -> str:
    text = orjson.dumps(value, default=str).decode()
    return text if len(text) <= width else text[: width - 1] + "…"


class RunDetail(VerticalScroll):
    """Plain text built from plain data; the styles come from component classes."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        *STATUS_CLASSES,
        "detail--heading",
        "detail--muted",
        "detail--good",
        "detail--bad",
        "detail--added",
        "detail--changed",
        "detail--removed",
    }

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.info: RunInfo | None = None
        self.extra: dict[str, Any] | None = None  # state, sessions, git: read separately
        self.empty_text = "no run selected"

    def compose(self) -> ComposeResult:
        yield Static(id="detail-text", markup=False)

    def on_mount(self) -> None:
        self._redraw()

    def show_run(self, info: RunInfo | None) -> None:
        if info is None or self.info is None or info.run != self.info.run:
            self.extra = None
        self.info = info
        self._redraw()

    def show_extra(self, run_id: str, extra: dict[str, Any]) -> None:
        if self.info is not None and self.info.run == run_id:
            self.extra = extra
            self._redraw()

    def show_empty(self, text: str) -> None:
        self.info, self.extra, self.empty_text = None, None, text
        self._redraw()

    def _style(self, name: str) -> Any:
        return self.get_component_rich_style(f"detail--{name}", partial=True)

    def _redraw(self) -> None:
        if not self.is_mounted:
            return
        text = Text()
        if self.info is None:
            text.append(self.empty_text, style=self._style("muted"))
        else:
            self._about(text, self.info)
            if self.extra is not None:
                self._state(text, self.extra["state"])
                self._sessions(text, self.extra["sessions"])
                self._git(text, self.extra["git"])
            else:
                text.append("\nreading state, sessions and commits…", style=self._style("muted"))
        self.query_one("#detail-text", Static).update(text)

    def _heading(self, text: Text, title: str) -> None:
        text.rstrip()
        text.append(f"\n\n{title}\n", style=self._style("heading"))

    def _about(self, text: Text, info: RunInfo) -> None:
        muted = self._style("muted")
        text.append(info.run + "  ")
        text.append_text(status_text(self, info.status))
        text.append(f"\n{info.key} ({info.flow})", style=muted)
        how = start_words(info.start, info.source, info.snapshot)
        text.append("\n" + ("fresh start" if how == "fresh" else how))
        text.append(f"\nrounds {rounds_label(info)} ({info.rounds} in this run)")
        if info.budget_limits or info.budget_reached:
            text.append(f"\nbudget {budget_words(info.chain_budget().to_json())}")
        if info.budget_reached:
            text.append(f"\npaused: {budget_reached_words(info.budget_reached)}")
        text.append(f"\nstarted {stamp(info.started)} · {duration(info.started, info.ended)}")
        if info.ended:
            text.append(f"\nended   {stamp(info.ended)}")
        if info.usage is not None:
            text.append(f"\nusage {usage_text(info.usage.to_json())}")
        if info.stop_pending:
            text.append("\nstop asked: " + ("now" if info.stop_now else "after its round"))
        if info.pause_pending:
            text.append("\npause asked: after its round")
        if isinstance(info.error, dict):
            text.append(f"\nerror {error_words(info.error)}", style=self._style("bad"))
        elif info.result is not None:
            text.append(f"\nresult {_short(info.result, 60)}")
        for warning in info.warnings[-3:]:
            text.append(f"\nwarning {warning}", style=self._style("bad"))

    def _state(self, text: Text, view: dict[str, Any]) -> None:
        """Each key's state one value a line; the run's own key marks what changed since
        the run it was picked up from (+ added, ~ changed, - removed)."""
        if view.get("error"):
            self._heading(text, "state")
            text.append(f"unreadable: {view['error']}", style=self._style("bad"))
            return
        states: dict[str, Any] = view.get("state") or {}
        own = view.get("key")
        changes = view.get("changes") or {"added": {}, "changed": {}, "removed": {}}
        if not states:
            self._heading(text, "state")
            text.append("empty", style=self._style("muted"))
        for key in sorted(states, key=lambda k: (k != own, k)):
            self._heading(text, f"state · {key}")
            values = states[key] if isinstance(states[key], dict) else {}
            if key == own and view.get("source"):
                since = (
                    f"since {view['source']}"
                    if view.get("changes") is not None
                    else f"changes since {view['source']}: {view.get('changes_error')}"
                )
                text.append(f"{since}\n", style=self._style("muted"))
            if not values:
                text.append("  (empty)\n", style=self._style("muted"))
            for name, value in values.items():
                if key == own and name in changes["added"]:
                    text.append(f"+ {name} = {_short(value, 200)}\n", style=self._style("added"))
                elif key == own and name in changes["changed"]:
                    before = changes["changed"][name][0]
                    text.append(f"~ {name} = {_short(value, 200)}", style=self._style("changed"))
                    text.append(f"  (was {_short(before)})\n", style=self._style("muted"))
                else:
                    text.append(f"  {name} = {_short(value, 200)}\n")
            if key == own:
                for name, value in changes["removed"].items():
                    text.append(f"- {name}  (was {_short(value)})\n", style=self._style("removed"))
        text.rstrip()

    def _sessions(self, text: Text, sessions: list[dict[str, Any]]) -> None:
        self._heading(text, f"sessions ({len(sessions)})" if sessions else "sessions")
        if not sessions:
            text.append("none", style=self._style("muted"))
        for session in sessions:
            healthy = bool(session.get("exists"))
            exit_code = session.get("exit_code")
            text.append(
                f"{session.get('backend')} {session.get('link')} → {session.get('target')} "
            )
            text.append(
                "ok" if healthy else "link broken", style=self._style("good" if healthy else "bad")
            )
            if exit_code is not None:
                text.append(f" · exit {exit_code}", style=self._style("muted"))
            if session.get("usage") is not None:
                spent = usage_short(session["usage"])
                text.append(f" · {spent} tokens in/out", style=self._style("muted"))
            text.append("\n")

    def _git(self, text: Text, git: dict[str, Any] | None) -> None:
        self._heading(text, "commits")
        if git is None:
            text.append("not a git repository: no commits recorded", style=self._style("muted"))
            return
        commits = git.get("commits") or []
        if not commits:
            text.append("none while it ran", style=self._style("muted"))
        for commit in commits:
            text.append(f"{str(commit.get('sha'))[:10]} ", style=self._style("muted"))
            text.append(f"{commit.get('summary')}\n")
