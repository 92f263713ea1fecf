"""flowdrop-tui: long loops that can be stopped, paused and picked up where they left off.

What a flow imports::

    from flowdrop_tui import flow

    @flow(resumable=True, description="Review the repo once a night")
    def main(run):
        for round in run.rounds():
            run.state["last"] = round

Importing this package never imports the terminal UI.
"""

from __future__ import annotations

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
from flowdrop_tui.core.flows.declaration import flow
from flowdrop_tui.core.records.snapshot import ensure_resumable, seed_next_turn

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
