"""The main screen's parts and lower panes, imported when first used — just after the
first frame, which shows only the flow list (bench/README.md, (c): the first frame
paid for importing the run pane, the actions and their dialogs, the readers)."""

from __future__ import annotations

from functools import cached_property
from typing import TYPE_CHECKING, cast

from flowdrop_tui.core.paths import split_lane

if TYPE_CHECKING:
    from textual.dom import DOMNode

    from flowdrop_tui.core.paths import Layout
    from flowdrop_tui.core.records.run_record.run_info import Status
    from flowdrop_tui.core.watch import WorkspaceWatch
    from flowdrop_tui.tui.messages import (
        FreshRunPlanned,
        LandPlanned,
        LaneLanded,
        PickUpPlanned,
    )
    from flowdrop_tui.tui.run_tracker import RunTracker
    from flowdrop_tui.tui.screens.lane_actions import LaneActions
    from flowdrop_tui.tui.screens.launch_actions import LaunchActions
    from flowdrop_tui.tui.screens.open_files import OpenFiles
    from flowdrop_tui.tui.screens.selection import SelectionScreen
    from flowdrop_tui.tui.screens.stop_actions import StopActions
    from flowdrop_tui.tui.screens.workspace_reads import WorkspaceReads
    from flowdrop_tui.tui.widgets.event_feed import EventFeed
    from flowdrop_tui.tui.widgets.run_detail import RunDetail
    from flowdrop_tui.tui.widgets.run_table import RunTable


LANE_ACTIONS = frozenset({"land_lane", "show_lane_diff", "fresh_run"})  # main_keys.LANE_KEYS


class LazyParts:
    """Mixed into ``MainScreen``: its parts made, and its panes' classes imported, on
    first use; the keys its parts answer handed to them."""

    workspace: Layout

    @cached_property
    def watcher(self) -> WorkspaceWatch:
        """The workspace's watch, made when first followed or read (after the first frame)."""
        from flowdrop_tui.core.watch import WorkspaceWatch

        return WorkspaceWatch(self.workspace)

    @cached_property
    def tracker(self) -> RunTracker:
        from flowdrop_tui.tui.run_tracker import RunTracker

        return RunTracker(self.workspace)

    @cached_property
    def reads(self) -> WorkspaceReads:
        from flowdrop_tui.tui.screens.workspace_reads import WorkspaceReads

        return WorkspaceReads(self._selection(), self.watcher)

    @cached_property
    def launch_actions(self) -> LaunchActions:
        from flowdrop_tui.tui.screens.launch_actions import LaunchActions

        return LaunchActions(self._selection())

    @cached_property
    def stop_actions(self) -> StopActions:
        from flowdrop_tui.tui.screens.stop_actions import StopActions

        return StopActions(self._selection())

    @cached_property
    def lane_actions(self) -> LaneActions:
        from flowdrop_tui.tui.screens.lane_actions import LaneActions

        return LaneActions(self._selection())

    @cached_property
    def open_files(self) -> OpenFiles:
        from flowdrop_tui.tui.screens.open_files import OpenFiles

        return OpenFiles(self._selection())

    # -- the keys its parts answer (the bindings: main_keys.py, in MainScreen.BINDINGS) ----------

    def action_run_flow(self) -> None:
        if "lane_actions" in vars(self) and self.lane_actions.landing(self._selected()):
            return
        self.launch_actions.run_flow()

    def action_pick_up_run(self) -> None:
        self.launch_actions.pick_up_run()

    def action_fresh_run(self) -> None:
        self.launch_actions.fresh_run()

    def action_fresh_run_unlisted(self) -> None:
        self.launch_actions.fresh_run()

    def action_pause_run(self) -> None:
        self.stop_actions.pause_run()

    def action_resume_run(self) -> None:
        self.launch_actions.resume_run()

    def action_close_run(self) -> None:
        self.stop_actions.close_run()

    def action_raise_budget(self) -> None:
        self.launch_actions.raise_budget()

    def on_pick_up_planned(self, message: PickUpPlanned) -> None:
        self.launch_actions.pick_up_planned(message)

    def on_fresh_run_planned(self, message: FreshRunPlanned) -> None:
        self.launch_actions.fresh_run_planned(message)

    def action_land_lane(self) -> None:
        self.lane_actions.land_lane()

    def action_land_lane_hint(self) -> None:
        self.lane_actions.land_lane()

    def action_show_lane_diff(self) -> None:
        self.open_files.show_diff()

    def on_land_planned(self, message: LandPlanned) -> None:
        self.lane_actions.land_planned(message)

    def on_lane_landed(self, message: LaneLanded) -> None:
        self.lane_actions.landed(message)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """L and the lane's d are in force (and in the footer) only on a lane's row; on
        another row L falls through to its hint and d to the run's diff. At 80 columns,
        on a lane, L takes n's place in the footer and d stays in help (main_keys.py)."""
        if action not in LANE_ACTIONS:
            return True
        name = self._selected()
        lane = name is not None and split_lane(name)[1] is not None
        narrow = self._node().has_class("-narrow")
        if action == "fresh_run":
            return not (lane and narrow)  # else n is its unlisted binding's
        if action == "show_lane_diff":
            return lane and not narrow
        return lane

    def action_show_diff(self) -> None:
        self.open_files.show_diff()

    def action_edit_flow(self) -> None:
        self.open_files.edit_flow()

    def action_open_state(self) -> None:
        self.open_files.open_state()

    def action_open_transcript(self) -> None:
        self.open_files.open_transcript()

    def action_copy_run_id(self) -> None:
        self.open_files.copy_run_id()

    def _selected(self) -> str | None:
        return self._selection().selected_flow_name()

    def _selection(self) -> SelectionScreen:
        return cast("SelectionScreen", self)

    def _node(self) -> DOMNode:
        return cast("DOMNode", self)

    @property
    def runs(self) -> RunTable:
        from flowdrop_tui.tui.widgets.run_table import RunTable

        return self._node().query_one(RunTable)

    @property
    def feed(self) -> EventFeed:
        from flowdrop_tui.tui.widgets.event_feed import EventFeed

        return self._node().query_one(EventFeed)

    @property
    def detail(self) -> RunDetail:
        from flowdrop_tui.tui.widgets.run_detail import RunDetail

        return self._node().query_one(RunDetail)


def lower_panes() -> tuple[type[EventFeed], type[RunDetail], type[RunTable]]:
    """The classes of the panes mounted after the first frame."""
    from flowdrop_tui.tui.widgets.event_feed import EventFeed
    from flowdrop_tui.tui.widgets.run_detail import RunDetail
    from flowdrop_tui.tui.widgets.run_table import RunTable

    return EventFeed, RunDetail, RunTable


def live_statuses() -> frozenset[Status]:
    """``run_info.LIVE``, imported when the screen first needs it (after the first frame)."""
    from flowdrop_tui.core.records.run_record.run_info import LIVE

    return LIVE
