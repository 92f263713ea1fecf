"""What a thread has spent since its chain began (SPEC §14), in one record read.

Each run records, when it takes a key up, what that key's chain had spent
before it: ``chain_usage`` in its ``created`` event (for its own key) and in
the first ``call_started`` of a called key (see docs/records.md). So a
thread's usage is its last run's ``chain_usage`` plus what the sessions
opened under the key in that run spent — however long the chain, one record
is read. A record written before ``chain_usage`` existed recorded no usage
either, so it counts as nothing spent before.
"""

from __future__ import annotations

from flowdrop_tui.core.errors import FlowdropError
from flowdrop_tui.core.paths import Layout
from flowdrop_tui.core.records.run_record.run_fold import (
    load_run,  # a big record: only what it appended
)
from flowdrop_tui.core.records.spend.usage import Usage, total


def thread_usage(layout: Layout, key: str, run_id: str | None) -> Usage | None:
    """What ``key``'s chain has spent up to and including ``run_id`` (the key's last run,
    or the run a new one picks up from); ``None`` when nothing reported usage, or
    the run cannot be read."""
    if not run_id:
        return None
    try:
        info = load_run(layout, run_id)
    except FlowdropError:
        return None
    return total([info.chain_before.get(key), info.usage_of(key)])


def chain_usage_field(layout: Layout, key: str, source: str | None) -> dict[str, int] | None:
    """The ``chain_usage`` to record for a run (or call) of ``key`` starting from
    ``source``: what the chain spent through ``source``; ``None`` for a fresh start."""
    spent = thread_usage(layout, key, source)
    return spent.to_json() if spent is not None else None
