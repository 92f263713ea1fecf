"""``L``: land the selected lane (SPEC §23), after asking; the workers behind it.

The lane is read (its branch and base branch, from its record) and the landing done
in thread workers (git runs; the UI never waits on it), answered by messages:
``LandPlanned`` asks, ``LaneLanded`` or ``RunActionRefused`` (the refusal's one
line: nothing changed) say how it went. A lane being landed is landed once: a
second ``L`` or ``y`` meanwhile does nothing.
"""

from __future__ import annotations

from flowdrop_tui.core.errors import FlowdropError
from flowdrop_tui.core.lanes import landing
from flowdrop_tui.core.lanes.known import lane_of
from flowdrop_tui.core.mode import lanes_on_origin
from flowdrop_tui.core.paths import split_lane
from flowdrop_tui.tui.messages import FlowsChanged, LandPlanned, LaneLanded, RunActionRefused
from flowdrop_tui.tui.screens.confirm_modal import ask
from flowdrop_tui.tui.screens.land_lane_modal import METHOD, LandLaneModal
from flowdrop_tui.tui.screens.run_part import RunPart
from flowdrop_tui.tui.screens.selection import SelectionScreen, work_on_screen
from flowdrop_tui.tui.user_writes import user_write

NOT_A_LANE = (
    "L lands the selected lane (a flow's row @N) into its base branch, after asking; "
    "start lanes with: flowdrop-tui run FLOW --lanes 3"
)


class LaneActions(RunPart):
    """What ``L`` does, on the screen's selection, and the answer to its question."""

    def __init__(self, screen: SelectionScreen) -> None:
        super().__init__(screen)
        self.busy: set[str] = set()  # lanes being read, asked about or landed

    def land_lane(self) -> None:
        key = self._need_flow()
        if key is None:
            return
        if split_lane(key)[1] is None:
            self.screen.notify(NOT_A_LANE, markup=False, timeout=8)
            return
        if key in self.busy:
            return  # its question is on its way, on screen, or it is being landed
        self.busy.add(key)
        facts = self.screen.lane_facts(key)
        if facts and facts.get("branch"):  # the lane list read it: asked at once
            self.land_planned(LandPlanned(key, str(facts["branch"]), facts.get("base_branch")))
        else:
            self.plan_land(key)

    @work_on_screen(thread=True, group="lanes-land")
    def plan_land(self, key: str) -> None:
        lane = lane_of(self.workspace, key)
        if lane is None:
            self.busy.discard(key)
            self.screen.post_message(
                RunActionRefused(f"{key} has no run that made its worktree yet", "NOT_FOUND")
            )
            return
        self.screen.post_message(LandPlanned(key, lane.branch, lane.base_branch))

    def land_planned(self, message: LandPlanned) -> None:
        """Ask; land on yes, the question kept up until it is done. Nothing asked
        (another question is open): nothing done."""
        key = message.key

        def answered(_: bool | None) -> None:
            self.busy.discard(key)  # no, or landed (the landing said how it went)

        def land(modal: LandLaneModal) -> None:
            self.land(key, message.into, modal)

        modal = LandLaneModal(key, message.branch, message.into, land)
        if not ask(self.screen.app, modal, answered):
            self.busy.discard(key)

    @work_on_screen(thread=True, group="lanes-land")
    @user_write
    def land(self, key: str, into: str | None, modal: LandLaneModal) -> None:
        try:
            landed = landing.land(
                self.workspace,
                key,
                into=into,
                method=METHOD,
                remote=lanes_on_origin(self.workspace),  # its branch fetched first
            )
        except FlowdropError as exc:
            self.screen.post_message(RunActionRefused(exc.message, exc.code))
        else:
            self.screen.post_message(LaneLanded(dict(landed)))
        finally:
            self.screen.app.call_from_thread(modal.done)

    def landed(self, message: LaneLanded) -> None:
        """Say where it landed, with the commit; the lane rows read again."""
        landed = message.landed
        commit = str(landed.get("commit") or "")[:12]
        self.screen.notify(
            f"landed {landed.get('lane')} into {landed.get('into')} "
            f"({landed.get('method')}): commit {commit}",
            markup=False,
            timeout=8,
        )
        self.screen.post_message(FlowsChanged())  # its row says landed (its log, not watched)

    def landing(self, key: str | None) -> bool:
        """Whether ``key`` is being asked about or landed: enter on it waits."""
        if key is not None and key in self.busy:
            self.screen.notify(f"{key} is being landed: a moment", markup=False)
            return True
        return False
