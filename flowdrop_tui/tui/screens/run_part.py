"""What the keys that act on runs share: ``RunPart``, the base of ``LaunchActions``
(``launch_actions.py``: enter, ``r``, ``n``, ``b`` and the answers to their
questions) and ``StopActions`` (``stop_actions.py``: escape, ``p``, ``x``).

Every action goes through the workspace's mode (``core/mode.py``, chosen once when
the app started): today's launch and verbs locally; in remote mode runs start on
workers, and stop and pause reach the worker holding the run.
"""

from __future__ import annotations

from collections.abc import Callable

from flowdrop_tui.core.mode import Mode
from flowdrop_tui.core.paths import Layout
from flowdrop_tui.core.records.run_record.run_info import RunInfo, Status
from flowdrop_tui.tui.screens.selection import SelectionScreen

UI = {"via": "ui"}  # who asked, as recorded in the run's stop/pause events


class RunPart:
    """A part of the main screen whose keys act on runs: the screen's selection, the
    mode, and which run a key acts on (``MainScreen``'s ``action_*`` methods call the
    subclasses)."""

    def __init__(self, screen: SelectionScreen) -> None:
        self.screen = screen
        self.workspace: Layout = screen.workspace
        self.mode: Mode = screen.mode  # chosen once, at the app's start
        self.rereading = False  # a key's second look, after the records were synced

    def _current_run(self, *statuses: Status) -> RunInfo | None:
        """The selected flow's newest run in one of ``statuses`` (the selected run first)."""
        selected = self.screen.selected_run_info()
        if selected is not None and selected.status in statuses:
            return selected
        for info in self.screen.runs_of_selected_flow():
            if info.status in statuses:
                return info
        return None

    def _none_after_sync(self, retry: Callable[[], None]) -> bool:
        """The key found no run in the state it acts on. The runs shown may be behind the
        store (in remote mode this replica; anywhere, a change still being read): the
        records are synced and read again and ``retry`` called once they are shown.
        True when it then found none again (say so), False while they are read again."""
        if self.rereading:
            return True

        def again() -> None:
            self.rereading = True
            try:
                retry()
            finally:
                self.rereading = False

        self.screen.read_runs_again(again)
        return False

    def _need_flow(self) -> str | None:
        name = self.screen.selected_flow_name()
        if name is None:
            self.screen.notify(self.screen.no_flow_text(), severity="warning", markup=False)
        return name
