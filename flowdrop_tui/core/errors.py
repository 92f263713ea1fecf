"""One error family. Each class's ``code`` is the CLI's JSON error code and its
``exit_code`` the process exit status (SPEC §11)."""

from __future__ import annotations

from typing import ClassVar


class FlowdropError(Exception):
    """An expected failure: shown to the user as a message, never as a traceback."""

    code: ClassVar[str] = "ERROR"
    exit_code: ClassVar[int] = 1

    def __init__(self, message: str, code: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code  # type: ignore[misc]

    def as_json(self) -> dict[str, dict[str, str]]:
        return {"error": {"code": self.code, "message": self.message}}


class UsageError(FlowdropError):
    code = "USAGE"
    exit_code = 2


class InvalidNameError(UsageError):
    """An id, key or path that is malformed or would leave `.flowdrop/`."""

    code = "INVALID_NAME"


class NotFoundError(FlowdropError):
    code = "NOT_FOUND"
    exit_code = 2


class NoStateForKeyError(NotFoundError):
    code = "NO_STATE_FOR_KEY"


class RefusedError(FlowdropError):
    code = "REFUSED"
    exit_code = 3


class TerminalSnapshotError(RefusedError):
    """INT-14: a snapshot or checkpoint of a finished run is not resumable."""

    code = "PIPELINE_TERMINAL"


class AlreadyRunningError(RefusedError):
    code = "ALREADY_RUNNING"


class NotResumableError(RefusedError):
    code = "NOT_RESUMABLE"


class UnusableStateError(RefusedError):
    """INT-15: a state that cannot be consumed is refused, never replaced by a fresh one."""

    code = "UNUSABLE_STATE"


class RecordsUnwritableError(RefusedError):
    code = "RECORDS_UNWRITABLE"


class LinkRefusedError(RecordsUnwritableError, OSError):
    """A link where the engine writes under ``.flowdrop/``: never written through.

    Also an ``OSError``, so every place that carries on when a cache cannot be
    written (the index, the describe cache) carries on the same way."""


class LockTimeoutError(RefusedError, OSError):
    """A lock another process held past the wait for it (a process stopped with
    Ctrl-Z); the message names it. Also an ``OSError``: the index behind such a lock is
    a cache, and every place that carries on without a cache carries on the same way."""

    code = "LOCK_HELD"


class SignalRefusedError(RefusedError):
    """INT-16: a stop, pause or resume the run cannot take (codes below)."""

    code = "SIGNAL_REFUSED"


class OutputUnreadableError(RefusedError):
    """A run's ``output.log`` that is a link or not a regular file: it is not read."""

    code = "OUTPUT_UNREADABLE"


PIPELINE_TERMINAL = "PIPELINE_TERMINAL"
NO_ACTIVE_PAUSE = "NO_ACTIVE_PAUSE"
INWARD_SIGNAL_ALREADY_PENDING = "INWARD_SIGNAL_ALREADY_PENDING"
ALREADY_PAUSED = "ALREADY_PAUSED"


class FlowLoadError(FlowdropError):
    """A flow that cannot be loaded: refused before any run exists (exit 1)."""

    code = "FLOW_LOAD_ERROR"
    exit_code = 1


class BudgetExhaustedError(RefusedError):
    """SPEC §14: the next round would go over a budget; names the budget, limit and used."""

    code = "BUDGET_EXHAUSTED"


class DriftedError(RefusedError):
    """SPEC §15: ``--strict`` and the flow or the repository changed since the source run."""

    code = "DRIFTED"
