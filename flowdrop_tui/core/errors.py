"""The one error family: ``FlowdropError`` and a class per code.

Each class that declares a ``code`` owns it — the CLI's JSON error code — and no
two classes declare the same one (checked as each class is made, and by a test
that also finds each code documented in docs/spec.md). A subclass that declares
none refines its parent's (``LinkRefusedError`` is also an ``OSError``). Remote
mode's errors are in ``core/remote/remote_errors.py``, on the same bases.

``exit_code`` is the one place an error becomes a process exit status (SPEC §11):
2 usage or not found, 3 refused, 4 a server remote mode needs was not reached
("try again later"), 1 any other failure.
"""

from __future__ import annotations

from typing import ClassVar


class FlowdropError(Exception):
    """An expected failure: shown to the user as a message, never as a traceback."""

    code: ClassVar[str] = "ERROR"
    by_code: ClassVar[dict[str, type[FlowdropError]]] = {}

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        if "code" in cls.__dict__:
            owner = FlowdropError.by_code.setdefault(cls.code, cls)
            if owner is not cls:
                raise TypeError(f"code {cls.code} is {owner.__name__}'s, not {cls.__name__}'s")

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    @property
    def exit_code(self) -> int:
        return exit_code(self)

    def as_json(self) -> dict[str, dict[str, str]]:
        return {"error": {"code": self.code, "message": self.message}}


def error_for(code: str, message: str) -> FlowdropError:
    """The error another process reported by its code (a detached run's handshake, a
    worker's answer): the class that owns the code, so its exit status follows."""
    cls = FlowdropError.by_code.get(code, FlowdropError)
    error = cls.__new__(cls)
    FlowdropError.__init__(error, message)
    return error


class UsageError(FlowdropError):
    code = "USAGE"


class InvalidNameError(UsageError):
    """An id, key or path that is malformed or would leave `.flowdrop/`."""

    code = "INVALID_NAME"


class NotFoundError(FlowdropError):
    code = "NOT_FOUND"


class NoStateForKeyError(NotFoundError):
    code = "NO_STATE_FOR_KEY"


class RefusedError(FlowdropError):
    code = "REFUSED"


class UnreachableError(FlowdropError):
    """A server remote mode needs could not be reached: "try again later" (exit 4),
    apart from refusals (3) and failures (1)."""

    code = "UNREACHABLE"


class SignalRefusedError(RefusedError):
    """INT-16: a stop, pause or resume the run cannot take (a class per reason below)."""

    code = "SIGNAL_REFUSED"


class TerminalSnapshotError(SignalRefusedError):
    """INT-14: a snapshot or checkpoint of a finished run is not resumable; nor is a
    finished run stopped, paused or resumed."""

    code = "PIPELINE_TERMINAL"


class NoActivePauseError(SignalRefusedError):
    """A resume of a run that is not paused."""

    code = "NO_ACTIVE_PAUSE"


class SignalPendingError(SignalRefusedError):
    """A pause asked of a run that already has a stop or a pause pending."""

    code = "INWARD_SIGNAL_ALREADY_PENDING"


class AlreadyPausedError(SignalRefusedError):
    """A pause of a paused run; escape's stop of a run that paused meanwhile."""

    code = "ALREADY_PAUSED"


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


class OutputUnreadableError(RefusedError):
    """A run's ``output.log`` that is a link or not a regular file: it is not read."""

    code = "OUTPUT_UNREADABLE"


class FlowLoadError(FlowdropError):
    """A flow that cannot be loaded: refused before any run exists (exit 1)."""

    code = "FLOW_LOAD_ERROR"


class BudgetExhaustedError(RefusedError):
    """SPEC §14: the next round would go over a budget; names the budget, limit and used."""

    code = "BUDGET_EXHAUSTED"


class DriftedError(RefusedError):
    """SPEC §15: ``--strict`` and the flow or the repository changed since the source run."""

    code = "DRIFTED"


class NotARepositoryError(RefusedError):
    """A git read (``diff``) in a workspace that is not a git repository."""

    code = "NOT_A_REPOSITORY"


class CheckpointUnresolvedError(RefusedError):
    """SPEC §7: ``--resume ID`` that resolves to no run, under ``--strict``. Without
    ``--strict`` SG-12 wants a warning and a fresh start; with it, nothing starts."""

    code = "CHECKPOINT_UNRESOLVED"


class GateSelfAnswerError(RefusedError):
    """SPEC §21: an answer to a run's question from inside the run's own process tree
    (its descendants, including ones that outlived it): a run never answers itself."""

    code = "GATE_SELF_ANSWER"


class GateUnknownError(NotFoundError):
    """SPEC §21: ``answer`` names a gate the run never opened, or the run never asked."""

    code = "GATE_UNKNOWN"


class GateClosedError(RefusedError):
    """SPEC §21: ``answer`` of a gate already answered, or closed (the run was resumed
    without the answer, or ended)."""

    code = "GATE_CLOSED"


class BackendUnavailableError(FlowdropError):
    """A backend that cannot run here: its CLI is not installed, or it failed to load."""

    code = "BACKEND_UNAVAILABLE"


class GitError(FlowdropError):
    """A git command failed: a worker's checkout, a lane's worktree or landing."""

    code = "GIT_FAILED"


class DirtyTreeError(RefusedError):
    """A lane's tree, or the branch ``land`` would write, has uncommitted changes
    (SPEC §23): nothing was changed."""

    code = "DIRTY_TREE"


class LandConflictError(RefusedError):
    """``land`` met a conflict: the target left as it was, the files named (SPEC §23)."""

    code = "LAND_CONFLICT"


class UnmergedWorkError(RefusedError):
    """``lanes drop``/``prune`` of a lane whose commits or changes live nowhere else
    and no ``--archive`` asked to keep them (SPEC §23)."""

    code = "UNMERGED_WORK"


# The exit status of each kind of error, most specific first; anything else is 1.
EXIT_CODES: tuple[tuple[type[FlowdropError], int], ...] = (
    (UsageError, 2),
    (NotFoundError, 2),
    (RefusedError, 3),
    (UnreachableError, 4),
)


def exit_code(error: BaseException) -> int:
    """The process exit status for ``error`` (SPEC §11): the one place it is decided."""
    for kind, status in EXIT_CODES:
        if isinstance(error, kind):
            return status
    return 1
