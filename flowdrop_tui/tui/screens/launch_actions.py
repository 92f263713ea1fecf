"""The keys that launch runs — enter, r, n, b — and the workers behind them.

Every action calls the core from a thread worker (process starts and record
reads block) and answers with a message: ``RunLaunched``, ``RunActionTaken``,
``RunActionRefused`` or, before carrying state into a new run, ``PickUpPlanned``
/ ``FreshRunPlanned``, which ask the user first. Runs are always started
detached (``core.control``): they outlive this screen.

A run refused for its budget (``BUDGET_EXHAUSTED``) is offered the raise where the
refusal is: enter, ``r`` or ``b`` ask for the new limit (``raise_budget_modal.py``)
and go on under it, with the ``--max-KIND N`` the CLI would be given.
"""

from __future__ import annotations

from typing import Any

from flowdrop_tui.core.errors import BudgetExhaustedError, FlowdropError
from flowdrop_tui.core.flows.discovery import FlowRef, resolve_flow
from flowdrop_tui.core.paths import Layout
from flowdrop_tui.core.records.run_record.run_fold import load_run
from flowdrop_tui.core.records.run_record.run_info import LIVE, Status
from flowdrop_tui.core.records.spend.budget import KINDS, Limits, Reached
from flowdrop_tui.core.run import forecast, start_plan
from flowdrop_tui.tui.messages import (
    FreshRunPlanned,
    PickUpPlanned,
    RunActionRefused,
    RunActionTaken,
    RunLaunched,
)
from flowdrop_tui.tui.screens.confirm_modal import ask
from flowdrop_tui.tui.screens.main_keys import LAUNCH_KEYS
from flowdrop_tui.tui.screens.raise_budget_modal import limit_args
from flowdrop_tui.tui.screens.run_part import RunPart
from flowdrop_tui.tui.screens.selection import SelectionScreen, work_on_screen
from flowdrop_tui.tui.user_writes import user_write


class LaunchActions(RunPart):
    """What the keys that start or resume runs do, on the screen's selection, and the
    answers to the questions they ask."""

    BINDINGS = LAUNCH_KEYS  # the main screen's, named for its delegating methods

    def __init__(self, screen: SelectionScreen) -> None:
        super().__init__(screen)
        # The keys whose plan is being read (a press meanwhile does nothing).
        self.planning: set[str] = set()

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

    @work_on_screen(thread=True, group="control")
    @user_write
    def plan_run(self, key: str, from_run: str | None, limits: Limits | None = None) -> None:
        """Work out what the run would do — what ``plan`` says (``forecast``) — and ask
        first when it carries state forward; a refusal is said before anything starts.
        ``limits``: the ``--max-…`` it goes on under (a budget raised here)."""
        try:
            self._plan_run(key, from_run, limits or {})
        finally:
            self._done_planning(key)

    def _plan_run(self, key: str, from_run: str | None, limits: Limits) -> None:
        found = forecast.forecast_flow(
            self.workspace,
            key,
            forecast.StartOptions(from_run=from_run, limits=limits),
            cwd=self.workspace.workspace,
            isolated=True,  # git read in a child: gitpython stays out of the UI process
        )
        if found.refusal is not None:
            self._refused(found, from_run)
        elif found.resume is not None:  # SG-12: a paused run continues in its own record
            self._resume_or_ask(found, limits)
        elif found.source_id is not None:
            self.screen.post_message(PickUpPlanned(found.key, found, from_run, limits))
        else:
            self.screen.app.call_from_thread(self._launch_fresh, found.key, False, limits)

    def _resume_or_ask(self, found: forecast.Forecast, limits: Limits) -> None:
        """Resume at once, unless something drifted since it paused: then the preview."""
        assert found.resume is not None
        if found.drift is not None and found.drift.drifted:
            self.screen.post_message(PickUpPlanned(found.key, found, None, limits))
        else:
            self.screen.app.call_from_thread(
                self.resume, found.resume, found.key, True, limits or None
            )

    def _refused(self, found: forecast.Forecast, from_run: str | None) -> None:
        """Say the refusal; a budget's is offered its raise, in the frame after this."""
        refusal = found.refusal
        assert refusal is not None
        reached = found.budget.reached() if found.budget is not None else None
        if isinstance(refusal, BudgetExhaustedError) and reached is not None:
            paused = found.source.run if found.start == "resume" and found.source else None
            offer = (found.key, paused, from_run, reached)
            self.screen.app.call_from_thread(self.offer_raise, *offer)
        else:
            self.screen.post_message(RunActionRefused(refusal.message, refusal.code))

    def offer_raise(
        self, key: str, paused: str | None, from_run: str | None, reached: Reached
    ) -> None:
        """Ask for the new limit; go on under it: ``paused`` resumed, else ``key`` planned
        again (from ``from_run``) with it, so a pick-up still shows its preview."""
        from flowdrop_tui.tui.screens.raise_budget_modal import (  # loaded when first asked
            RaiseBudgetModal,
            lift_confirmed,
        )

        whose = f"run {paused}" if paused else f"{key}'s chain"
        flag = f"--max-{reached.budget} N"
        cli = (
            f"resume {paused}"
            if paused
            else f"run {key}" + (f" --from {from_run}" * bool(from_run))
        )

        def answered(limits: Limits) -> None:
            if paused is not None:
                self.resume(paused, key, False, limits)
            elif self._start_planning(key):
                self.plan_run(key, from_run, limits)

        question = RaiseBudgetModal(
            whose, reached, f"flowdrop-tui {cli} {flag}", resuming=paused is not None
        )
        ask(self.screen.app, question, lift_confirmed(self.screen.app, answered))

    # -- b: raise a budget before (or without) a refusal ----------------------------------------

    def raise_budget(self) -> None:
        """The selected run's budget: a paused run's own, else its flow's next pick-up's
        (from the selected run). Refused or not, the budget nearest its limit is asked."""
        name = self._need_flow()
        if name is None or self.screen.runs_not_shown_yet(self.raise_budget):
            return
        info = self._current_run(Status.PAUSED) or self.screen.selected_run_info()
        if info is not None and info.status in LIVE:
            self.screen.notify(f"run {info.run} is running: raise it once it pauses", markup=False)
        elif self._start_planning(f"raise {name}"):
            paused = info.run if info is not None and info.status == Status.PAUSED else None
            self.plan_raise(name, paused, info.run if info is not None and not paused else None)

    @work_on_screen(thread=True, group="control")
    @user_write
    def plan_raise(self, key: str, paused: str | None, from_run: str | None) -> None:
        try:
            if paused is not None:
                found = resume_forecast(self.workspace, paused, key)
            else:
                options = forecast.StartOptions(from_run=from_run)
                found = forecast.forecast_flow(
                    self.workspace, key, options, cwd=self.workspace.workspace, isolated=True
                )
            if found is None:  # the flow cannot be described: enter or r says why
                self.screen.post_message(RunActionTaken(paused or "", f"{key} cannot run now"))
                return
            if found.budget is None and found.refusal is not None:
                self.screen.post_message(
                    RunActionRefused(found.refusal.message, found.refusal.code)
                )
                return
            reached = found.budget.reached() or nearest_budget(found) if found.budget else None
            if reached is None:
                text = f"{key} has no budget to raise: it runs without a limit"
                self.screen.post_message(RunActionTaken(paused or "", text))
                return
            offer = (found.key or key, paused, from_run, reached)
            self.screen.app.call_from_thread(self.offer_raise, *offer)
        finally:
            self._done_planning(f"raise {key}")

    def pick_up_planned(self, message: PickUpPlanned) -> None:
        from flowdrop_tui.tui.screens.pick_up_modal import (
            PickUpModal,  # loaded when first asked, not at start
        )

        found = message.forecast

        def answered(yes: bool | None) -> None:
            limits = message.limits
            if yes and found.resume is not None:
                self.resume(found.resume, message.key, True, limits or None)
            elif yes:
                what = f"picked up from {found.source_id}, round {found.next_round}"
                self.launch(
                    message.key, from_run=message.from_run, fresh=False, what=what, limits=limits
                )

        ask(self.screen.app, PickUpModal(message.key, found), answered)

    @work_on_screen(thread=True, group="control")
    @user_write
    def launch(
        self,
        key: str,
        *,
        from_run: str | None,
        fresh: bool,
        what: str,
        limits: Limits | None = None,
    ) -> None:
        try:
            ref = resolve_flow(self.workspace, key, cwd=self.workspace.workspace)
            options = forecast.StartOptions(from_run=from_run, fresh=fresh, limits=limits or {})
            answer = self.mode.start(ref, options, limit_args(options.limits))
        except FlowdropError as exc:
            self.screen.post_message(RunActionRefused(exc.message, exc.code))
            return
        for warning in answer.get("warnings") or []:
            self.screen.post_message(RunActionTaken(str(answer.get("run")), f"warning: {warning}"))
        self.screen.post_message(RunLaunched(str(answer["run"]), key, what))

    # -- n --------------------------------------------------------------------------------

    def fresh_run(self) -> None:
        name = self._need_flow()
        if name is not None and self._start_planning(f"fresh {name}"):
            self.plan_fresh(name)

    @work_on_screen(thread=True, group="control")
    @user_write
    def plan_fresh(self, key: str) -> None:
        """A fresh run drops nothing when there is nothing to pick up: ask only then."""
        try:
            self._plan_fresh(key)
        finally:
            self._done_planning(f"fresh {key}")

    def _plan_fresh(self, key: str) -> None:
        try:
            ref, resumable = checked_ref(self.workspace, key)
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

    def _launch_fresh(self, key: str, fresh: bool, limits: Limits | None = None) -> None:
        what = "fresh, round 1" if fresh or not limits else "round 1"
        self.launch(key, from_run=None, fresh=fresh, what=what, limits=limits)

    def fresh_run_planned(self, message: FreshRunPlanned) -> None:
        from flowdrop_tui.tui.screens.fresh_run_modal import (
            FreshRunModal,  # loaded when first asked, not at start
        )

        def answered(yes: bool | None) -> None:
            if yes:
                self._launch_fresh(message.key, True)

        ask(self.screen.app, FreshRunModal(message.key, message.plan), answered)

    # -- r ---------------------------------------------------------------------------------------

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
    @user_write
    def resume(
        self, run_id: str, key: str, previewed: bool = False, limits: Limits | None = None
    ) -> None:
        """``limits``: the ``--max-…`` it resumes under (a budget raised here)."""
        if not previewed:
            # Budgets and drift first (SPEC §14, §15): a refusal is said (a budget's is
            # offered its raise), a drift is shown.
            found = resume_forecast(self.workspace, run_id, key, limits)
            if found is not None and found.refusal is not None:
                found.key = found.key or key
                self._refused(found, None)
                return
            if found is not None and found.drift is not None and found.drift.drifted:
                self.screen.post_message(PickUpPlanned(key, found, None, limits or {}))
                return
        try:
            info = load_run(self.workspace, run_id)
            extra = limit_args(limits or {})
            answer: dict[str, Any] = self.mode.resume(run_id, extra, by={"via": "ui"})
        except FlowdropError as exc:
            self.screen.post_message(RunActionRefused(exc.message, exc.code))
            return
        what = f"resumed at round {info.next_round}"  # a question's round: again
        self.screen.post_message(RunLaunched(str(answer.get("run") or run_id), key, what))


def resume_forecast(
    workspace: Layout, run_id: str, key: str, limits: Limits | None = None
) -> forecast.Forecast | None:
    """What resuming ``run_id`` would meet (budgets, drift); None when its flow cannot
    be described."""
    try:
        ref = resolve_flow(workspace, key, cwd=workspace.workspace)
        described = forecast.runnable(workspace, ref)
    except FlowdropError:
        return None  # the launch reports it, as it always did
    options = forecast.StartOptions(limits=limits or {})
    return forecast.forecast_resume(
        workspace,
        run_id,
        ref.folder,
        declared=described.budget,
        options=options,
        isolated=True,
    )


def checked_ref(workspace: Layout, key: str) -> tuple[FlowRef, bool]:
    """The flow named ``key``, and whether it is resumable (described in a child)."""
    ref = resolve_flow(workspace, key, cwd=workspace.workspace)
    return ref, bool(forecast.runnable(workspace, ref).resumable)


def nearest_budget(found: forecast.Forecast) -> Reached | None:
    """The limited budget with the least left, as a fraction of its limit."""
    assert found.budget is not None
    limited = [
        Reached(kind, limit, found.budget.used.of(kind))
        for kind in KINDS
        if (limit := found.budget.limits.get(kind)) is not None
    ]
    return min(limited, key=lambda r: (r.limit - r.used) / r.limit, default=None)
