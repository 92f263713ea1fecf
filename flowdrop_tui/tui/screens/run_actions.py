"""The keys that act on runs — enter, escape, p, r, n, x — and the workers behind them.

Every action calls the core from a thread worker (process starts and record
reads block) and answers with a message: ``RunLaunched``, ``RunActionTaken``,
``RunActionRefused`` or, before carrying state into a new run, ``PickUpPlanned``
/ ``FreshRunPlanned``, which ask the user first. Runs are always started
detached (``core.control``): they outlive this screen.

Escape stops live runs only. A paused run is closed for good by ``x`` after a
confirmation naming it; no sequence of escapes can close it (docs/decisions.md).

Every action goes through the workspace's mode (``core/mode.py``, chosen once when
the app started): today's launch and verbs locally; in remote mode runs start on
workers, and stop and pause reach the worker holding the run.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

from textual.binding import Binding, BindingType

from flowdrop_tui.core.control import verbs
from flowdrop_tui.core.errors import FlowdropError
from flowdrop_tui.core.flows.discovery import FlowRef, resolve_flow
from flowdrop_tui.core.mode import Mode
from flowdrop_tui.core.paths import Layout
from flowdrop_tui.core.records.run_fold import load_run
from flowdrop_tui.core.records.run_info import LIVE, RunInfo, Status
from flowdrop_tui.core.run import forecast, start_plan
from flowdrop_tui.format import asked_text
from flowdrop_tui.tui.messages import (
    FreshRunPlanned,
    PickUpPlanned,
    RunActionRefused,
    RunActionTaken,
    RunLaunched,
)
from flowdrop_tui.tui.screens.confirm_modal import ask
from flowdrop_tui.tui.screens.selection import SelectionScreen, work_on_screen

UI = {"via": "ui"}  # who asked, as recorded in the run's stop/pause events


class RunActions:
    """What the keys that act on runs do, on the screen's selection (``MainScreen``'s
    ``action_*`` methods call these)."""

    # The main screen's BINDINGS take these (actions named for its delegating methods).
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding(
            "escape",
            "stop_run",
            "Stop",
            id="stop",
            tooltip="Stop the selected flow's live run after its round; again: stop it now. "
            "Escape first closes the filter, a dialog or help; it never closes a paused run",
        ),
        Binding(
            "p",
            "pause_run",
            "Pause",
            id="pause",
            tooltip="Pause the selected flow's run after its round",
        ),
        Binding("r", "resume_run", "Resume", id="resume", tooltip="Resume the selected paused run"),
        Binding(
            "x",
            "close_run",
            "Close",
            id="close",
            tooltip="Close the selected flow's paused run for good (asks first, naming it)",
        ),
        Binding(
            "n",
            "fresh_run",
            "Fresh",
            id="fresh",
            tooltip="Start the selected flow fresh: round 1, empty state",
        ),
    ]

    def __init__(self, screen: SelectionScreen) -> None:
        self.screen = screen
        self.workspace: Layout = screen.workspace
        self.mode: Mode = screen.mode  # chosen once, at the app's start
        # The keys whose plan is being read (a press meanwhile does nothing).
        self.planning: set[str] = set()
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

    # -- enter ----------------------------------------------------------------------------

    def run_flow(self) -> None:
        name = self._need_flow()
        if name is not None and self._start_planning(name):
            self.plan_run(name, None)

    def pick_up_run(self) -> None:
        info = self.screen.selected_run_info()
        if info is None or info.key is None:
            self.screen.notify("no run selected", severity="warning")
        elif info.status == Status.PAUSED:
            self.resume(info.run, info.key)
        elif self._start_planning(info.key):
            self.plan_run(info.key, info.run)

    def _start_planning(self, key: str) -> bool:
        """False while a plan for ``key`` is still being read: the same key pressed
        again meanwhile does nothing (its question is on its way; ``ask`` shows one)."""
        if key in self.planning:
            return False
        self.planning.add(key)
        return True

    def _done_planning(self, key: str) -> None:
        """From the plan's worker thread, after it has posted its answer (a set's
        discard is atomic)."""
        self.planning.discard(key)

    def _checked_ref(self, key: str) -> tuple[FlowRef, bool]:
        ref = resolve_flow(self.workspace, key, cwd=self.workspace.workspace)
        return ref, bool(forecast.runnable(self.workspace, ref).resumable)

    @work_on_screen(thread=True, group="control")
    def plan_run(self, key: str, from_run: str | None) -> None:
        """Work out what the run would do — what ``plan`` says (``forecast``) — and ask
        first when it carries state forward; a refusal is said before anything starts."""
        try:
            self._plan_run(key, from_run)
        finally:
            self._done_planning(key)

    def _plan_run(self, key: str, from_run: str | None) -> None:
        found = forecast.forecast_flow(
            self.workspace,
            key,
            forecast.StartOptions(from_run=from_run),
            cwd=self.workspace.workspace,
            isolated=True,  # git read in a child: gitpython stays out of the UI process
        )
        if found.refusal is not None:
            self.screen.post_message(RunActionRefused(found.refusal.message, found.refusal.code))
        elif found.resume is not None:  # SG-12: a paused run continues in its own record
            self._resume_or_ask(found)
        elif found.source_id is not None:
            self.screen.post_message(PickUpPlanned(found.key, found, from_run))
        else:
            self.screen.app.call_from_thread(self._launch_fresh, found.key, False)

    def _resume_or_ask(self, found: forecast.Forecast) -> None:
        """Resume at once, unless something drifted since it paused: then the preview."""
        assert found.resume is not None
        if found.drift is not None and found.drift.drifted:
            self.screen.post_message(PickUpPlanned(found.key, found, None))
        else:
            self.screen.app.call_from_thread(self.resume, found.resume, found.key, True)

    def pick_up_planned(self, message: PickUpPlanned) -> None:
        from flowdrop_tui.tui.screens.pick_up_modal import (
            PickUpModal,  # loaded when first asked, not at start
        )

        found = message.forecast

        def answered(yes: bool | None) -> None:
            if yes and found.resume is not None:
                self.resume(found.resume, message.key, True)
            elif yes:
                what = f"picked up from {found.source_id}, round {found.next_round}"
                self.launch(message.key, from_run=message.from_run, fresh=False, what=what)

        ask(self.screen.app, PickUpModal(message.key, found), answered)

    @work_on_screen(thread=True, group="control")
    def launch(self, key: str, *, from_run: str | None, fresh: bool, what: str) -> None:
        try:
            ref = resolve_flow(self.workspace, key, cwd=self.workspace.workspace)
            options = forecast.StartOptions(from_run=from_run, fresh=fresh)
            answer = self.mode.start(ref, options, [])
        except FlowdropError as exc:
            self.screen.post_message(RunActionRefused(exc.message, exc.code))
            return
        for warning in answer.get("warnings") or []:
            self.screen.post_message(RunActionTaken(str(answer.get("run")), f"warning: {warning}"))
        self.screen.post_message(RunLaunched(str(answer["run"]), key, what))

    def _resume_forecast(self, run_id: str, key: str) -> forecast.Forecast | None:
        try:
            ref = resolve_flow(self.workspace, key, cwd=self.workspace.workspace)
            described = forecast.runnable(self.workspace, ref)
        except FlowdropError:
            return None  # the launch reports it, as it always did
        options = forecast.StartOptions()
        return forecast.forecast_resume(
            self.workspace,
            run_id,
            ref.folder,
            declared=described.budget,
            options=options,
            isolated=True,
        )

    # -- n --------------------------------------------------------------------------------

    def fresh_run(self) -> None:
        name = self._need_flow()
        if name is not None and self._start_planning(f"fresh {name}"):
            self.plan_fresh(name)

    @work_on_screen(thread=True, group="control")
    def plan_fresh(self, key: str) -> None:
        """A fresh run drops nothing when there is nothing to pick up: ask only then."""
        try:
            self._plan_fresh(key)
        finally:
            self._done_planning(f"fresh {key}")

    def _plan_fresh(self, key: str) -> None:
        try:
            ref, resumable = self._checked_ref(key)
        except FlowdropError as exc:
            self.screen.post_message(RunActionRefused(exc.message, exc.code))
            return
        plan: start_plan.StartPlan | None = None
        if resumable:
            try:
                plan = start_plan.plan(self.workspace, ref.key, resumable=True)
            except FlowdropError:
                plan = None  # nothing usable to drop; the launch reports any refusal
        if plan is not None and (plan.resume is not None or plan.source is not None):
            self.screen.post_message(FreshRunPlanned(ref.key, plan))
        else:
            self.screen.app.call_from_thread(self._launch_fresh, ref.key, True)

    def _launch_fresh(self, key: str, fresh: bool) -> None:
        self.launch(key, from_run=None, fresh=fresh, what="fresh, round 1")

    def fresh_run_planned(self, message: FreshRunPlanned) -> None:
        from flowdrop_tui.tui.screens.fresh_run_modal import (
            FreshRunModal,  # loaded when first asked, not at start
        )

        def answered(yes: bool | None) -> None:
            if yes:
                self._launch_fresh(message.key, True)

        ask(self.screen.app, FreshRunModal(message.key, message.plan), answered)

    # -- escape, p, r ---------------------------------------------------------------------------

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
    def close_paused(self, run_id: str) -> None:
        try:
            asked = self.mode.stop(run_id, now=False, by=UI)
        except FlowdropError as exc:
            self.screen.post_message(RunActionRefused(exc.message, exc.code))
            return
        self.screen.post_message(RunActionTaken(run_id, asked_text(asked)))

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
    def pause(self, run_id: str) -> None:
        """The words and the round are the CLI's (``asked_text``): the round in flight."""
        try:
            asked = self.mode.pause(run_id, by=UI)
        except FlowdropError as exc:
            self.screen.post_message(RunActionRefused(exc.message, exc.code))
            return
        self.screen.post_message(RunActionTaken(run_id, f"{asked_text(asked)} — r resumes it"))

    def resume_run(self) -> None:
        name = self._need_flow()
        if name is None or self.screen.runs_not_shown_yet(self.resume_run):
            return
        info = self._current_run(Status.PAUSED)
        if info is None or info.key is None:
            if self._none_after_sync(self.resume_run):
                self.screen.notify(f"{name} has no paused run to resume", markup=False)
        else:
            self.resume(info.run, info.key)

    @work_on_screen(thread=True, group="control")
    def resume(self, run_id: str, key: str, previewed: bool = False) -> None:
        if not previewed:
            # Budgets and drift first (SPEC §14, §15): a refusal is said, a drift is shown.
            found = self._resume_forecast(run_id, key)
            if found is not None and found.refusal is not None:
                refusal = RunActionRefused(found.refusal.message, found.refusal.code)
                self.screen.post_message(refusal)
                return
            if found is not None and found.drift is not None and found.drift.drifted:
                self.screen.post_message(PickUpPlanned(key, found, None))
                return
        try:
            info = load_run(self.workspace, run_id)
            answer: dict[str, Any] = self.mode.resume(run_id, [], by={"via": "ui"})
        except FlowdropError as exc:
            self.screen.post_message(RunActionRefused(exc.message, exc.code))
            return
        what = f"resumed at round {info.round + 1}"
        self.screen.post_message(RunLaunched(str(answer.get("run") or run_id), key, what))
