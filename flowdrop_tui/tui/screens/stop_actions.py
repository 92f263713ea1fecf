"""The keys that stop runs — escape, p, x — and the workers behind them.

Every action calls the core from a thread worker (the verbs read records and signal
processes) and answers with a message: ``RunActionTaken`` or ``RunActionRefused``.

Escape stops live runs only. A paused run is closed for good by ``x`` after a
confirmation naming it; no sequence of escapes can close it (docs/decisions.md).
"""

from __future__ import annotations

from collections.abc import Callable

from flowdrop_tui.core.control import verbs
from flowdrop_tui.core.errors import FlowdropError
from flowdrop_tui.core.records.run_record.run_info import LIVE, Status
from flowdrop_tui.format import asked_text
from flowdrop_tui.tui.messages import RunActionRefused, RunActionTaken
from flowdrop_tui.tui.screens.confirm_modal import ask
from flowdrop_tui.tui.screens.main_keys import STOP_KEYS
from flowdrop_tui.tui.screens.run_part import UI, RunPart
from flowdrop_tui.tui.screens.selection import work_on_screen
from flowdrop_tui.tui.user_writes import user_write


class StopActions(RunPart):
    """What escape, ``p`` and ``x`` do, on the screen's selection."""

    BINDINGS = STOP_KEYS  # the main screen's, named for its delegating methods

    # -- escape ---------------------------------------------------------------------------------

    def stop_run(self, again: Callable[[], None] | None = None) -> None:
        """``again``: what to call once the runs are shown, when they are not yet (the
        screen's escape, which backs out of a filter first; by default this)."""
        name = self._need_flow()
        if name is None or self.screen.runs_not_shown_yet(again or self.stop_run):
            return
        info = self._current_run(*LIVE)  # one live run per flow
        if info is None and not self._none_after_sync(lambda: self.stop_run(again)):
            return
        if info is None:
            paused = self._current_run(Status.PAUSED)
            if paused is not None:
                self.screen.notify(
                    f"run {paused.run} of {name} is paused; escape leaves it so. "
                    "r resumes it; x closes it for good (asks first)",
                    markup=False,
                )
            else:
                self.screen.notify(f"{name} has no live run to stop", markup=False)
            return
        now = info.run in self.screen.tracker.stop_asked
        self.screen.tracker.stop_asked.add(info.run)
        self.stop(info.run, now)

    @work_on_screen(thread=True, group="control")
    @user_write
    def stop(self, run_id: str, now: bool) -> None:
        """Escape: stop a live run. A run that paused meanwhile is refused, not closed."""
        try:
            asked = self.mode.stop(run_id, now=now, by=UI, keep_paused=True)
        except FlowdropError as exc:
            self.screen.post_message(RunActionRefused(exc.message, exc.code))
            return
        if asked.action == verbs.Action.STOP_NOW:
            text = f"stopping run {run_id} now: round {asked.round} is interrupted"
        else:
            text = f"stopping after round {asked.round} — escape again to stop now"
        self.screen.post_message(RunActionTaken(run_id, text))

    # -- x: close a paused run, after asking -----------------------------------------------

    def close_run(self) -> None:
        name = self._need_flow()
        if name is None or self.screen.runs_not_shown_yet(self.close_run):
            return
        info = self._current_run(Status.PAUSED)
        if info is None and self._none_after_sync(self.close_run):
            self.screen.notify(f"{name} has no paused run to close", markup=False)
        if info is None:
            return
        from flowdrop_tui.tui.screens.close_run_modal import (  # loaded when first asked
            CloseRunModal,
        )

        def answered(yes: bool | None) -> None:
            if yes:
                self.close_paused(info.run)

        ask(self.screen.app, CloseRunModal(info), answered)

    @work_on_screen(thread=True, group="control")
    @user_write
    def close_paused(self, run_id: str) -> None:
        try:
            asked = self.mode.stop(run_id, now=False, by=UI)
        except FlowdropError as exc:
            self.screen.post_message(RunActionRefused(exc.message, exc.code))
            return
        self.screen.post_message(RunActionTaken(run_id, asked_text(asked)))

    # -- p ------------------------------------------------------------------------------------

    def pause_run(self) -> None:
        name = self._need_flow()
        if name is None or self.screen.runs_not_shown_yet(self.pause_run):
            return
        info = self._current_run(*LIVE)
        if info is None:
            if self._none_after_sync(self.pause_run):
                self.screen.notify(f"{name} has no live run to pause", markup=False)
        else:
            self.pause(info.run)

    @work_on_screen(thread=True, group="control")
    @user_write
    def pause(self, run_id: str) -> None:
        """The words and the round are the CLI's (``asked_text``): the round in flight."""
        try:
            asked = self.mode.pause(run_id, by=UI)
        except FlowdropError as exc:
            self.screen.post_message(RunActionRefused(exc.message, exc.code))
            return
        self.screen.post_message(RunActionTaken(run_id, f"{asked_text(asked)} — r resumes it"))
