"""What the power-cut and I/O-fault harnesses share: how a saved state is judged, and
the engine's record readers (found in an older checkout's layout too, so it can be
measured the same way; docs/decisions.md, "One home per fact")."""

from __future__ import annotations

import importlib
from typing import Any


def valid_state(state: Any) -> bool:
    """A state the flow set: ``{}`` or ``n`` with ``half == n // 2`` (one ``update`` a round,
    so a torn save or one half of one save and half of another shows)."""
    if state == {}:
        return True
    return (
        isinstance(state, dict)
        and set(state) == {"n", "half"}
        and isinstance(state["n"], int)
        and state["half"] == state["n"] // 2
    )


def engine() -> tuple[Any, Any, Any]:
    """The engine's record readers: ``fold``, ``read_events``, ``read_states`` — the last
    given a run's ``state.json`` path, reading the run's state as the engine does (its
    state log first, where the engine keeps one)."""
    try:
        folding = importlib.import_module("flowdrop_tui.core.records.run_record.run_fold")
        lines = importlib.import_module("flowdrop_tui.core.records.log.event_lines")
        state = importlib.import_module("flowdrop_tui.core.records.flow_state.state")
        if hasattr(state, "read_run_states"):  # the state log (issue 28): its newest first
            return folding.fold, lines.read_events, lambda path: state.read_run_states(path.parent)
        return folding.fold, lines.read_events, state.read_states
    except ImportError:  # the layout before issue 21, to measure an older checkout
        pass
    try:
        events = importlib.import_module("flowdrop_tui.core.records.events")
        state = importlib.import_module("flowdrop_tui.core.records.flow_state.state")
    except ImportError:  # an older checkout's layout (docs/decisions.md, "One home per fact")
        events = importlib.import_module("flowdrop_tui.core.records")
        state = importlib.import_module("flowdrop_tui.core.state")
    return events.fold, events.read_events, state.read_states
