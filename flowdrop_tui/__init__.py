"""flowdrop-tui: long loops that can be stopped, paused and picked up where they left off.

What a flow imports::

    from flowdrop_tui import flow

    @flow(resumable=True, description="Review the repo once a night")
    def main(run):
        for round in run.rounds():
            run.state["last"] = round

Importing this package never imports the terminal UI, and loads the declaration and
the snapshot helpers only when a flow asks for them (``__getattr__``): the command
and the UI start without them (bench/README.md, (c)).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from flowdrop_tui.core.errors import (
    AlreadyRunningError,
    FlowdropError,
    FlowLoadError,
    NotFoundError,
    NotResumableError,
    RefusedError,
    SignalRefusedError,
    TerminalSnapshotError,
    UnusableStateError,
    UsageError,
)

if TYPE_CHECKING:
    from flowdrop_tui.core.flows.declaration import flow
    from flowdrop_tui.core.records.flow_state.snapshot import ensure_resumable, seed_next_turn

_LAZY = {
    "flow": "flowdrop_tui.core.flows.declaration",
    "ensure_resumable": "flowdrop_tui.core.records.flow_state.snapshot",
    "seed_next_turn": "flowdrop_tui.core.records.flow_state.snapshot",
}

__version__ = "0.1.0"

__all__ = [
    "AlreadyRunningError",
    "FlowLoadError",
    "FlowdropError",
    "NotFoundError",
    "NotResumableError",
    "RefusedError",
    "SignalRefusedError",
    "TerminalSnapshotError",
    "UnusableStateError",
    "UsageError",
    "__version__",
    "ensure_resumable",
    "flow",
    "seed_next_turn",
]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        found = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = found
        return found
    raise AttributeError(f"module 'flowdrop_tui' has no attribute {name!r}")
