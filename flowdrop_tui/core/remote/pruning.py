"""``prune`` in remote mode: today's rules over the replica, deletion in PostgreSQL.

The verdicts are ``core/retention.plan_prune``'s, over the replica just synced (live,
paused, pinned, pick-up, last-run, newest, recent: nothing is worked out again here).
The runs it says go are deleted through ``PostgresStore.delete_runs``, which never
deletes a live run, under the space's pin lock (``shared_pins.pin_lock``) with the pins read
again under it — so a run pinned or started on another machine meanwhile stays. The
replica then applies the deletion as any other change (a sync here now; every other
machine at its next sync). The deleted runs' ``refs/flowdrop/runs/<run>`` are
deleted on the origin (and in this clone), best effort. Transcripts are not touched: a
remote run's are on its worker.
"""

from __future__ import annotations

from flowdrop_tui.core import retention
from flowdrop_tui.core.paths import Layout
from flowdrop_tui.core.remote import reading, shared_pins
from flowdrop_tui.core.remote.config import RemoteConfig
from flowdrop_tui.core.retention import PruneResult, Verdict, Why

DELETE_TIMEOUT = 120.0  # seconds for the deletion itself (a big prune deletes many rows)


def prune(
    layout: Layout,
    config: RemoteConfig,
    keep: int = retention.DEFAULT_KEEP,
    older_than: float | None = None,
    *,
    dry_run: bool = False,
    now: float | None = None,
    include_replaced: bool = False,
) -> PruneResult:
    """Delete what ``retention.plan_prune`` says goes, in PostgreSQL (``dry_run``: say it)."""
    reading.synced(layout, config)
    plan = retention.plan_prune(
        layout, keep, older_than, now=now, include_replaced=include_replaced
    )
    plan.orphans = []  # a remote run's transcripts live on its worker, not here
    result = PruneResult(plan=plan, dry_run=dry_run)
    if dry_run or not plan.delete:
        return result
    deleted, skipped = reading.bounded(
        config, "the deletion", lambda: _delete(config, plan.delete), DELETE_TIMEOUT
    )
    result.deleted = deleted
    result.skipped = skipped
    reading.synced(layout, config)  # the replica here applies it now, the others on sync
    # Their commits' refs on the origin go too (best effort: the records are gone).
    reading.drop_run_refs(layout.workspace, config.origin, [v.run for v in deleted])
    return result


def _delete(
    config: RemoteConfig, verdicts: list[Verdict]
) -> tuple[list[Verdict], list[tuple[Verdict, str]]]:
    deleted, pinned = shared_pins.delete_unpinned(config, [v.run for v in verdicts])
    gone, held = set(deleted), set(pinned)
    skipped = [(v, str(Why.PINNED)) for v in verdicts if v.run in held]
    # delete_runs keeps a run that went live meanwhile (resumed on another machine).
    skipped += [(v, str(Why.LIVE)) for v in verdicts if v.run not in gone | held]
    return [v for v in verdicts if v.run in gone], skipped
