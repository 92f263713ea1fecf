"""The replica's list of starts waiting for a worker (``records/listing/queued_starts.py``),
brought up to date from ``fd_starts`` with every sync: one read of the space's rows
still ``asked`` or ``forwarding`` (a start taken, answered or withdrawn is not one)."""

from __future__ import annotations

from datetime import datetime

from flowdrop_tui.core.paths import Layout
from flowdrop_tui.core.records.listing import queued_starts
from flowdrop_tui.core.records.listing.queued_starts import QueuedStart
from flowdrop_tui.core.remote.postgres.store import PostgresStore
from flowdrop_tui.core.remote.remote_errors import NotPermittedError


def refresh(layout: Layout, store: PostgresStore) -> None:
    """Write the space's waiting starts into the replica. A role that may not read
    ``fd_starts`` (a viewer) leaves the list as it is: it cannot know better."""
    try:
        rows = store.rows(
            "SELECT key, asked, task_queue, asked_by FROM fd_starts WHERE space = %s "
            "AND state IN ('asked', 'forwarding') ORDER BY asked, id",
            (store.space,),
        )
    except NotPermittedError:
        return
    starts = [
        QueuedStart(
            str(key),
            asked.isoformat() if isinstance(asked, datetime) else str(asked),
            str(queue),
            None if by is None else str(by),
        )
        for key, asked, queue, by in rows
    ]
    queued_starts.write(layout, starts)
