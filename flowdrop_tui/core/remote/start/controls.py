"""A stop or pause of a live run, asked through PostgreSQL so that its roles decide it
(docs/remote.md, "Who can do what").

Both ends of one protocol: the client inserts a row of ``fd_controls`` (``ask``) — a
role without ``INSERT`` there (a viewer) is refused by PostgreSQL before anything
reaches a worker — and names its id in the ``control`` Update; the holding worker
acts on the Update only once it took that row (``take``: deleted, so it is used once)
for that run and verb, and only when the row's ``asked_by`` (set by the database, as
for ``fd_starts``) may operate in the run's space (``fd_may_operate``). An Update
sent through Temporal alone names no row, and is refused ``NOT_PERMITTED``.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Protocol

from flowdrop_tui.core.errors import FlowdropError
from flowdrop_tui.core.remote.postgres.store import PostgresStore
from flowdrop_tui.core.remote.remote_errors import NotPermittedError
from flowdrop_tui.core.remote.start import grants

if TYPE_CHECKING:
    from flowdrop_tui.core.remote.workflow import DeliverInput

VERBS = {"stop": "stop", "stop_now": "stop", "pause": "pause"}  # the row's → the verb typed


def ask(store: PostgresStore, run_id: str, verb: str) -> str:
    """The id of a new ``fd_controls`` row of the store's space asking ``verb`` of
    ``run_id``; ``NotPermittedError`` naming the verb and the role when PostgreSQL
    refuses it (a viewer)."""
    control = uuid.uuid4().hex
    store.ensure_schema()
    try:
        store.rows(
            "INSERT INTO fd_controls (id, space, run_id, verb) VALUES (%s, %s, %s, %s)",
            (control, store.space, run_id, verb),
        )
    except NotPermittedError as exc:
        reason = grants.reason(exc)
        raise grants.refusal(store, VERBS[verb], store.space, reason) from exc
    return control


def withdraw(store: PostgresStore, control: str) -> None:
    """Delete a row no worker took (the run was not live): nothing is left to act on.
    Best effort: a row left behind is good only for this run and verb, by an Update
    naming its random id, and the worker's own answer already came."""
    try:
        store.rows("DELETE FROM fd_controls WHERE id = %s", (control,))
    except FlowdropError:
        pass


class _Opens(Protocol):
    def open(self, space: str) -> PostgresStore: ...


def check(access: _Opens, request: DeliverInput, worker: str) -> None:
    """``take`` on a store of the run's space (the workflow's), opened for it."""
    store = access.open(request.space)
    try:
        take(store, request.control, request.run, request.verb, worker)
    finally:
        store.close()


def take(store: PostgresStore, control: str | None, run_id: str, verb: str, worker: str) -> None:
    """On the holding worker, before it acts: the row ``control`` of this store's space,
    for ``run_id`` and ``verb``, deleted (used once); ``NotPermittedError`` unless it
    was there and its ``asked_by`` may operate in the space."""
    rows = (
        []
        if control is None
        else store.rows(
            "DELETE FROM fd_controls WHERE id = %s AND space = %s AND run_id = %s "
            "AND verb = %s RETURNING asked_by",
            (control, store.space, run_id, verb),
        )
    )
    asker = str(rows[0][0]) if rows and rows[0][0] is not None else None
    if asker is not None and store.may_operate(asker):
        return
    who = f"role {asker}" if asker else "a request no fd_controls row names (Temporal alone)"
    raise NotPermittedError(
        f"`{VERBS.get(verb, verb)}`: worker {worker} refused it for run {run_id} in space "
        f"{store.space}: {who} is not granted operator in that space (an admin grants it: "
        f"flowdrop-tui remote grant operator ROLE --space {store.space})"
    )
