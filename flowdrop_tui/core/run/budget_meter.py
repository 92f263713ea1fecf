"""The budget check a run makes before each round (SPEC §14), from its own record.

What the chain has used is read the way every other reader reads it — the
run's ``cycle.jsonl`` folded (``records.run_fold``), new lines only — so the figure
that pauses a run is the figure ``show``, ``plan`` and the next start see, and a
``kill -9`` loses none of it. The meter follows the record before every round, limits
or none: its fold is the one kept in the cache (``KeptFold``), so a week-long run's
end and every reader of it fold only its last lines (docs/reliability.md).
"""

from __future__ import annotations

from pathlib import Path

from flowdrop_tui.core.paths import Layout
from flowdrop_tui.core.records.run_record.run_fold import KeptFold
from flowdrop_tui.core.records.spend.budget import ChainBudget, Reached


class BudgetMeter:
    """Follows one run's record; says which budget, if any, stops its next round."""

    def __init__(self, layout: Layout, run_id: str, run_dir: Path) -> None:
        self._fold = KeptFold(layout, run_id, run_dir)
        # The limits in effect change only when the run is resumed, in a new process with
        # a new meter: a run with none only keeps its fold up to date.
        self._unlimited = False

    def budget(self) -> ChainBudget:
        """The limits in effect and what the chain has used, up to now."""
        return self._fold.update().chain_budget()

    def reached(self, *, rounds: bool) -> Reached | None:
        """The budget the next round would go over. ``rounds``: count the rounds budget
        too (a round of the run's own flow; a called flow's rounds are not its rounds)."""
        if self._unlimited:
            self._fold.update()  # the cached fold kept warm (a MiB at a time)
            return None
        budget = self.budget()
        if all(limit is None for limit in budget.limits.values()):
            self._unlimited = True
            return None
        if not rounds:
            budget.limits = {k: v for k, v in budget.limits.items() if k != "rounds"}
        return budget.reached()
