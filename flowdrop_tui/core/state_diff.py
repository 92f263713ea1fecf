"""``diff RUN --state [--against OTHER]``: what a run's state holds that another run's
did not — by default the run it was picked up from (its ``source``), so a pick-up's
"what did this week change in my state?" is one command.

Each run's own key is compared (the state a flow reads as ``run.state``; a called
flow's keys are its own threads). Values compare as JSON does: ``1`` and ``1.0`` are
the same number, key order in a mapping does not count.
"""

from __future__ import annotations

from typing import Any

from flowdrop_tui.core.errors import NotFoundError
from flowdrop_tui.core.paths import Layout
from flowdrop_tui.core.records.flow_state.state import read_run_states
from flowdrop_tui.core.records.run_record.run_fold import load_run


def compare(before: dict[str, Any], now: dict[str, Any]) -> dict[str, Any]:
    """``{"added": {name: value}, "removed": {name: value}, "changed": {name: {"old",
    "new"}}, "same": count}`` from ``before`` to ``now``, names in sorted order."""
    names = sorted(set(before) | set(now))
    added = {k: now[k] for k in names if k not in before}
    removed = {k: before[k] for k in names if k not in now}
    changed = {
        k: {"old": before[k], "new": now[k]}
        for k in names
        if k in before and k in now and before[k] != now[k]
    }
    same = sum(1 for k in names if k in before and k in now and before[k] == now[k])
    return {"added": added, "removed": removed, "changed": changed, "same": same}


def state_diff(layout: Layout, run_id: str, against: str | None = None) -> dict[str, Any]:
    """What ``run_id``'s state changed against ``against`` (default: the run it was
    picked up from). ``NotFoundError`` when there is nothing to compare with."""
    info = load_run(layout, run_id)
    other_id = against or info.source
    if other_id is None:
        raise NotFoundError(
            f"run {run_id} started fresh: it was picked up from no run "
            "(--against RUN compares it with another)"
        )
    other = load_run(layout, other_id)
    own = _own_state(read_run_states(info.path), info.key)
    before = _own_state(read_run_states(other.path), other.key)
    return {
        "run": info.run,
        "key": info.key,
        "against": other.run,
        "against_key": other.key,
        "source": against is None,  # compared with the run it was picked up from
        **compare(before, own),
    }


def _own_state(states: dict[str, Any], key: str | None) -> dict[str, Any]:
    found = states.get(key) if key is not None else None
    return found if isinstance(found, dict) else {}
