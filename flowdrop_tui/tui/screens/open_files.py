"""``e``, ``o``, ``t``: a flow's ``flow.py`` in ``$EDITOR``, a run's ``state.json`` or its
newest transcript in ``$PAGER`` — the terminal handed over, the screen back after;
``d``: what each round of the selected run changed, on a screen of its own; ``y``: the
selected run's id to the clipboard (OSC 52, so it works over ssh and in tmux).

The app is suspended (``App.suspend``) while the program runs in the same terminal;
runs are not touched, and the watch catches up with whatever changed meanwhile.
"""

from __future__ import annotations

import os
import shlex
import subprocess
from pathlib import Path

from textual.app import SuspendNotSupported

from flowdrop_tui.core import views
from flowdrop_tui.core.errors import FlowdropError
from flowdrop_tui.core.flows.discovery import resolve_flow
from flowdrop_tui.core.paths import FLOW_FILE, STATE, Layout
from flowdrop_tui.core.records.run_record.run_info import RunInfo
from flowdrop_tui.tui.screens.main_keys import FILE_KEYS
from flowdrop_tui.tui.screens.selection import SelectionScreen

EDITOR_DEFAULT = "vi"
PAGER_DEFAULT = "less"


def command_for(variable: str, default: str) -> list[str]:
    """``$EDITOR`` / ``$PAGER`` split as a shell would (``code -w``), or the default."""
    return shlex.split(os.environ.get(variable, "").strip() or default)


def newest_transcript(info: RunInfo) -> Path | None:
    """The transcript of the run's newest session that still exists, if any."""
    for session in reversed(views.sessions_of(info)):
        target = session.get("target")
        if session.get("exists") and isinstance(target, str):
            return Path(target)
    return None


class OpenFiles:
    """What ``e``, ``o`` and ``t`` do, on the screen's selection (``MainScreen``'s
    ``action_*`` methods call these)."""

    BINDINGS = FILE_KEYS  # the main screen's, named for its delegating methods

    def __init__(self, screen: SelectionScreen) -> None:
        self.screen = screen
        self.workspace: Layout = screen.workspace

    def edit_flow(self) -> None:
        name = self.screen.selected_flow_name()
        if name is None:
            self.screen.notify("no flow selected", severity="warning")
            return
        try:
            ref = resolve_flow(self.workspace, name, cwd=self.workspace.workspace)
        except FlowdropError as exc:
            self.screen.notify(exc.message, severity="warning", markup=False)
            return
        self.hand_over(command_for("EDITOR", EDITOR_DEFAULT), ref.folder / FLOW_FILE)

    def open_state(self) -> None:
        info = self.screen.selected_run_info()
        if info is None:
            self.screen.notify("no run selected", severity="warning")
            return
        self.hand_over(command_for("PAGER", PAGER_DEFAULT), info.path / STATE)

    def open_transcript(self) -> None:
        info = self.screen.selected_run_info()
        if info is None:
            self.screen.notify("no run selected", severity="warning")
            return
        transcript = newest_transcript(info)
        if transcript is None:
            self.screen.notify(f"run {info.run} has no transcript on disk", markup=False)
            return
        self.hand_over(command_for("PAGER", PAGER_DEFAULT), transcript)

    def copy_run_id(self) -> None:
        """The terminal puts it on the clipboard (``App.copy_to_clipboard``: OSC 52); a
        terminal that ignores OSC 52 leaves the notice's id to select by hand."""
        info = self.screen.selected_run_info()
        if info is None:
            self.screen.notify("no run selected: nothing copied", severity="warning")
            return
        self.screen.app.copy_to_clipboard(info.run)
        self.screen.notify(f"copied run id {info.run} (run {info.key})", markup=False)

    def show_diff(self) -> None:
        if self.screen.runs_not_shown_yet(self.show_diff):
            return  # a d typed right after moving to another flow or lane: its runs first
        info = self.screen.selected_run_info()
        if info is None:
            self.screen.notify("no run selected", severity="warning")
            return
        from flowdrop_tui.tui.screens.diff_screen import DiffScreen  # loaded when asked

        self.screen.app.push_screen(DiffScreen(self.screen.mode, info.run))

    def hand_over(self, command: list[str], path: Path) -> None:
        """Run ``command path`` in this terminal, the UI suspended until it exits."""
        if not path.exists():
            self.screen.notify(f"{path} does not exist", severity="warning", markup=False)
            return
        try:
            with self.screen.app.suspend():
                done = subprocess.run([*command, str(path)], check=False)
        except SuspendNotSupported:
            self.screen.notify(
                f"this terminal cannot be handed over; the file is {path}",
                severity="warning",
                markup=False,
            )
            return
        except OSError as exc:
            self.screen.notify(
                f"cannot run {command[0]} (set $EDITOR / $PAGER): {exc.strerror}",
                severity="warning",
                markup=False,
            )
            return
        if done.returncode != 0:
            self.screen.notify(f"{command[0]} exited {done.returncode}", markup=False)
