"""What a run is made of while it executes: frames (one per key), their loops, and the
exceptions that end a run between rounds."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from flowdrop_tui.core.records.flow_state.state import State


class StopRun(BaseException):
    """Raised between rounds when a stop was asked for: the run ends ``cancelled``.

    A ``BaseException`` so a flow's ``except Exception`` cannot swallow it.
    """


class PauseRun(BaseException):
    """Raised between rounds when a pause was asked for: the run saves and exits ``paused``."""


@dataclass(eq=False)
class Loop:
    """One ``rounds()`` loop in flight, and the round it has open."""

    frame: Frame
    gen: Iterator[Any] | None = None
    open_round: int | None = None
    open_index: int | None = None
    began: float = 0.0


@dataclass(eq=False)
class Frame:
    """One key's part of a run: the main flow, or a flow it called."""

    key: str
    flow: str
    state: State
    first_round: int
    round: int  # last round started in this key's chain
    restore: dict[str, Any] | None = None  # execution position for the first loop (resume)
    finished: int = 0  # rounds finished in this run (iterationCount, for the main frame)
    iterator: int | None = None
    loops: list[Loop] = field(default_factory=list)

    @property
    def open_round(self) -> int | None:
        """The innermost round in flight in this frame, if any."""
        for loop in reversed(self.loops):
            if loop.open_round is not None:
                return loop.open_round
        return None


def elapsed(since: float) -> float:
    return round(time.monotonic() - since, 3)
