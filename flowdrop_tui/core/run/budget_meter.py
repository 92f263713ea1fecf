"""The budget check a run makes before each round (SPEC §14), from its own record.

What the chain has used is read the way every other reader reads it — the
run's ``cycle.jsonl`` folded (``records.run_fold``), new lines only
(``records.tail``) — so the figure that pauses a run is the figure ``show``,
``plan`` and the next start see, and a ``kill -9`` loses none of it.
"""

from __future__ import annotations

from pathlib import Path

from flowdrop_tui.core.paths import CYCLE
from flowdrop_tui.core.records.budget import ChainBudget, Reached
from flowdrop_tui.core.records.run_fold import RunFold
from flowdrop_tui.core.records.tail import EventTail


class BudgetMeter:
    """Follows one run's record; says which budget, if any, stops its next round."""

    def __init__(self, run_id: str, run_dir: Path) -> None:
        self._fold = RunFold(run_id, run_dir)
        self._tail = EventTail(run_dir / CYCLE)
        # The limits in effect change only when the run is resumed, in a new process with
        # a new meter: a run with none stops reading its record after the first look.
        self._unlimited = False

    def budget(self) -> ChainBudget:
        """The limits in effect and what the chain has used, up to now."""
        while True:
            read = self._tail.read()
            self._fold.feed(read.events)
            if not read.more:
                break
        return self._fold.info.chain_budget()

    def reached(self, *, rounds: bool) -> Reached | None:
        """The budget the next round would go over. ``rounds``: count the rounds budget
        too (a round of the run's own flow; a called flow's rounds are not its rounds)."""
        if self._unlimited:
            return None
        budget = self.budget()
        if all(limit is None for limit in budget.limits.values()):
            self._unlimited = True
            return None
        if not rounds:
            budget.limits = {k: v for k, v in budget.limits.items() if k != "rounds"}
        return budget.reached()
