"""What a worker checks before it starts a run: the command line a client sent
(``check_request``), and that it serves the space and origin and that the asker may
operate there (``StartChecks``); each refusal is the answer the client prints.
"""

from __future__ import annotations

from flowdrop_tui.core.errors import UsageError
from flowdrop_tui.core.remote.config import space_of_origin
from flowdrop_tui.core.remote.daemon.run_keeper import RunStore
from flowdrop_tui.core.remote.remote_errors import NotPermittedError, NotServedError
from flowdrop_tui.core.remote.start.start_requests import StartTable
from flowdrop_tui.core.remote.workflow import CLOSE, RESUME, RUN, FlowInput

_VERBS = {RUN: "run", RESUME: "resume", CLOSE: "stop"}
_NEVER = ("--workspace", "--handshake-fd")  # the worker's own choices, never a client's


def check_request(request: FlowInput) -> None:
    """A command line a client sends: the mode's verb, nothing that moves the run out
    of its worktree or takes over the handshake."""
    verb = _VERBS.get(request.mode)
    args = request.args
    if (
        verb is None
        or not args
        or args[0] != verb
        or any(a.split("=")[0] in _NEVER for a in args)
        or any("\0" in a for a in args)
    ):
        raise UsageError(
            f"refused a request for key {request.key}: mode {request.mode!r} with command "
            f"line {args[:4]!r} is not one flowdrop-tui sends"
        )


class StartChecks:
    """A worker's checks of a start (``WorkerActivities`` is one)."""

    worker_id: str
    # ``worker --space``/``--origin``: what it serves (empty: any)
    spaces: tuple[str, ...]
    origins: tuple[str, ...]

    def check_served(self, request: FlowInput) -> None:
        """``NotServedError`` for a space or origin this worker was not told to serve
        (its answer, written into the start's row, is what the client prints)."""
        if self.spaces and request.space not in self.spaces:
            raise NotServedError(
                f"worker {self.worker_id} refused the start of {request.key}: it serves the "
                f"spaces {', '.join(self.spaces)}, not {request.space} (worker --space); "
                "start one that serves it, or on a task queue of the space's own"
            )
        if self.origins and space_of_origin(request.origin) not in self.origins:
            raise NotServedError(
                f"worker {self.worker_id} refused the start of {request.key}: it runs code "
                f"only from the origins it was told to serve (worker --origin), not "
                f"{request.origin}"
            )

    def check_asker(self, store: RunStore, request: FlowInput) -> None:
        """``NotPermittedError`` unless the database role that asked for the start may
        start runs in its space (``fd_may_operate``). Who asked is the ``fd_starts``
        row's ``asked_by``, set by PostgreSQL: a workflow started through Temporal with
        no such row names no one, and is refused."""
        asker = None if request.start is None else StartTable(store).asker(request.start)
        if asker is not None and store.may_operate(asker):
            return
        who = f"role {asker}" if asker else "a start no fd_starts row names (Temporal alone)"
        raise NotPermittedError(
            f"worker {self.worker_id} refused the start of {request.key} in space "
            f"{request.space}: {who} is not granted operator in that space (an admin grants "
            'it: docs/remote.md, "Who can do what")'
        )
