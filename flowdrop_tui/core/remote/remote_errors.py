"""Remote mode's side of the one error family (``core/errors.py``): a class per code.

Every class here is on one of the core's bases, so its exit status is decided where
every other is (``errors.exit_code``): the servers not reached are 4 ("try again
later"), refusals 3, anything else 1. A client that gets a worker's refusal by its
code (``errors.error_for``) finds these classes because remote mode imports this
module before it asks a worker anything.
"""

from __future__ import annotations

from flowdrop_tui.core.errors import FlowdropError, RefusedError, UnreachableError


class Fenced(RefusedError):
    """This writer's epoch is no longer its key's: another claim or the reaper moved
    it on. The writer must never write again."""

    code = "FENCED"


class StoreUnreachableError(UnreachableError):
    """PostgreSQL could not be reached or the connection broke mid-call. The call may
    or may not have committed; every write here is safe to send again."""

    code = "STORE_UNREACHABLE"


class StoreError(FlowdropError):
    """PostgreSQL refused a request (a missing table, a permission): not worth a retry."""

    code = "STORE_ERROR"


class StoreConflictError(FlowdropError):
    """Other bytes were already appended at that offset: the writer's file and the
    store's disagree."""

    code = "STORE_CONFLICT"


class RemoteUnreachableError(StoreUnreachableError):
    """PostgreSQL could not be reached, or stopped answering, while a command read or
    deleted: the store's error (its JSON code and exit status 4, so a script can tell
    "try again later" from a refusal, 3, or a failed flow, 1), raised here also for a
    server that accepted the connection and then went silent."""


class TemporalUnreachableError(UnreachableError):
    """The Temporal server could not be reached: as ``STORE_UNREACHABLE``, "try again
    later" (exit 4), apart from refusals (3) and failures (1)."""

    code = "TEMPORAL_UNREACHABLE"


class NotOnOriginError(RefusedError):
    """The asked commit is not on the origin: a worker cannot check it out."""

    code = "NOT_ON_ORIGIN"


class NotPermittedError(RefusedError):
    """PostgreSQL's roles do not let this role do it: a viewer's start, pin or prune, an
    operator's start in a space it is not granted, a bump or reap by a client
    (docs/remote.md, "Who can do what")."""

    code = "NOT_PERMITTED"


class NotServedError(RefusedError):
    """The worker that took the start serves other spaces or origins only
    (``worker --space``/``--origin``)."""

    code = "NOT_SERVED"


class LostContactError(FlowdropError):
    """A worker lost its contact with Temporal before the run existed: the client
    starts it again (docs/decisions.md, "Runs on Temporal workers")."""

    code = "WORKER_LOST"
