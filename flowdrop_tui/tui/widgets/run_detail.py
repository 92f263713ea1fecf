"""The selected run in full: what it is, the last lines it printed (a traceback
included), its state (and what changed since the run it was picked up from), its
sessions with link health, and the git commits it made."""

from __future__ import annotations

import re
from collections import deque
from typing import Any, ClassVar

import orjson
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import Static

from flowdrop_tui.core.records.run_record.run_info import LIVE, RunInfo
from flowdrop_tui.format import (
    budget_reached_words,
    budget_words,
    error_words,
    paused_by_words,
    run_times,
    start_words,
    usage_short,
    usage_text,
    waiting_words,
)
from flowdrop_tui.tui.labels import rounds_label, stamp
from flowdrop_tui.tui.widgets.status import STATUS_CLASSES, status_text

OUTPUT_SHOWN = 20  # the newest lines of output.log in the pane (``logs RUN`` has them all)
OUTPUT_WIDTH = 300  # a longer printed line is cut here
# Escape sequences and control characters a flow printed: shown, they would drive the
# terminal itself; they are dropped (colour codes) or shown as a replacement character.
_ESCAPES = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b[@-_]")
_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def printed_line(line: str) -> str:
    """One line of output.log as it can be shown safely in the pane."""
    text = _CONTROLS.sub("\ufffd", _ESCAPES.sub("", line)).replace("\t", "    ")
    return text if len(text) <= OUTPUT_WIDTH else text[: OUTPUT_WIDTH - 1] + "…"


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
        self.output: deque[str] = deque(maxlen=OUTPUT_SHOWN)  # the newest lines it printed
        self.output_seen = 0  # lines printed since it was selected (more than are shown?)
        self.output_error: str | None = None
        self.output_following = True  # keep the output's last line in view as it grows
        self._scrolling_to: float | None = None  # where the pane's own follow scroll goes

    def compose(self) -> ComposeResult:
        # Three parts, so the pane can keep the output's last line in view (follow it).
        yield Static(id="detail-about", markup=False)
        yield Static(id="detail-output", markup=False)
        yield Static(id="detail-text", markup=False)  # state, sessions, commits

    def on_mount(self) -> None:
        self._redraw()

    def show_run(self, info: RunInfo | None) -> None:
        if info is None or self.info is None or info.run != self.info.run:
            self.extra = None
            self.output.clear()
            self.output_seen = 0
            self.output_error = None
            self.output_following = True
        self.info = info
        self._redraw()

    def show_output(
        self, run_id: str, lines: list[str], *, fresh: bool, error: str | None = None
    ) -> None:
        """What the run printed since the last call (``fresh``: its last lines, anew)."""
        if self.info is None or self.info.run != run_id:
            return
        if not (fresh or lines or error != self.output_error):
            return
        if fresh:
            self.output.clear()
            self.output_seen = 0
            self.output_following = True
        self.output.extend(printed_line(line) for line in lines)
        self.output_seen += len(lines)
        self.output_error = error
        self._redraw()
        if self.output_following:
            self.call_after_refresh(self._show_output_end)

    # Following is a mode, set by where the user leaves the pane (as in the event feed):
    # with the output's last line in view, new lines keep it in view (a failed run shows
    # its traceback's end); scrolled elsewhere, the pane stays put.

    def output_end_in_view(self) -> bool:
        last = self.query_one("#detail-output").virtual_region.bottom - 1
        return self.scroll_y <= last < self.scroll_y + self.scrollable_content_region.height

    def watch_scroll_y(self, old_value: float, new_value: float) -> None:
        super().watch_scroll_y(old_value, new_value)
        if self._scrolling_to is not None and new_value == self._scrolling_to:
            self._scrolling_to = None  # its own scroll: laid out again, it may land short
            return
        if self.info is not None and self.output:
            self.output_following = self.output_end_in_view()

    def watch_virtual_size(self) -> None:
        if self.output_following:  # a part grew (or its lines wrapped anew): laid out now
            self.call_after_refresh(self._show_output_end)

    def on_resize(self) -> None:
        if self.output_following:  # the pane changed size
            self.call_after_refresh(self._show_output_end)

    def _show_output_end(self) -> None:
        if not self.output_following or not self.output or self.info is None:
            return
        last = self.query_one("#detail-output").virtual_region.bottom - 1
        height = self.scrollable_content_region.height
        if last < self.scroll_y:
            target = float(last)
        elif last >= self.scroll_y + height:
            target = float(last - height + 1)
        else:
            return  # in view already
        target = max(0.0, min(target, self.max_scroll_y))
        if target != self.scroll_y:
            self._scrolling_to = target
            self.scroll_to(y=target, animate=False)

    def show_extra(self, run_id: str, extra: dict[str, Any]) -> None:
        if self.info is not None and self.info.run == run_id:
            self.extra = extra
            self._redraw()

    def show_empty(self, text: str) -> None:
        self.info, self.extra, self.empty_text = None, None, text
        self._redraw()

    @property
    def plain_text(self) -> str:
        """The pane's whole text as shown: about, output, then state, sessions, commits."""
        parts = ("#detail-about", "#detail-output", "#detail-text")
        return "\n".join(str(self.query_one(part, Static).render()) for part in parts)

    def _style(self, name: str) -> Any:
        return self.get_component_rich_style(f"detail--{name}", partial=True)

    def _redraw(self) -> None:
        if not self.is_mounted:
            return
        about, printed, text = Text(), Text(), Text()
        if self.info is None:
            about.append(self.empty_text, style=self._style("muted"))
        else:
            self._about(about, self.info)
            self._output(printed, self.info)
            if self.extra is not None:
                if self.extra.get("worker"):  # remote mode: where it runs or ran
                    text.append(f"\nworker {self.extra['worker']}", style=self._style("muted"))
                self._state(text, self.extra["state"])
                self._sessions(text, self.extra["sessions"])
                self._git(text, self.extra["git"])
            else:
                text.append("\nreading state, sessions and commits…", style=self._style("muted"))
        self.query_one("#detail-about", Static).update(about)
        for part, content in (("#detail-output", printed), ("#detail-text", text)):
            static = self.query_one(part, Static)
            static.display = self.info is not None
            # Each part starts on the line after the one above: one newline less.
            static.update(content[1:] if content.plain.startswith("\n") else content)

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
        elif (why := paused_by_words(info.paused_by)) is not None:
            text.append(f"\npaused: {why}", style=self._style("bad"))
        if info.waiting_now is not None:
            text.append(f"\n{waiting_words(info.waiting_now)}", style=self._style("heading"))
        text.append(f"\nstarted {stamp(info.started)}")
        if info.started:  # named: the minutes budget counts the first, not paused time
            text.append(f"\ntime    {run_times(info.own_used().seconds, info.seconds())}")
        if info.ended:
            text.append(f"\nended   {stamp(info.ended)}")
        elif info.stopped_at:  # paused or killed: its running time ends at its last event
            text.append(f"\nlast event {stamp(info.stopped_at)}", style=self._style("muted"))
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

    def _output(self, text: Text, info: RunInfo) -> None:
        """The newest lines it printed, following as it prints: a failed run's traceback
        is here, under its one-line error."""
        if not self.output and not self.output_error:  # the common case: one line
            text.rstrip()
            text.append("\n\noutput ", style=self._style("heading"))
            live = info.status in LIVE
            text.append("nothing printed" + (" yet" if live else ""), style=self._style("muted"))
            return
        if self.output_seen > len(self.output):
            self._heading(text, f"output · last {len(self.output)} lines")
            text.append(f"all of it: flowdrop-tui logs {info.run}\n", style=self._style("muted"))
        else:
            self._heading(text, "output")
        if self.output_error:
            text.append(f"unreadable: {self.output_error}", style=self._style("bad"))
        for line in self.output:
            text.append(line + "\n")
        text.rstrip()

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
            target = session.get("target")  # Codex names its transcript later: null till then
            where = f"→ {target} " if target else "(transcript not named yet) "
            text.append(f"{session.get('backend')} {session.get('link')} {where}")
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
