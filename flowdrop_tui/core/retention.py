"""``prune``: delete ended runs and the transcripts kept for them, never what can be
picked up (SPEC §16).

What stays, and why (each run gets every reason that applies):

* ``live`` / ``paused`` — a run not ended (a paused run can still be resumed);
* ``pinned`` — ``pin RUN``;
* ``pick_up`` — what a plain ``run KEY`` (or a call of ``KEY``) would pick up or
  resume, for every key in the index, called keys included: asked of the start
  resolution itself (``plan.pick_up_source``), never worked out again here;
* ``latest_state`` — the same, for a key a plain run would not pick up today (its flow
  is gone, broken or not ``resumable``, as the describe cache knows): its latest state
  stays all the same, in case the flow says ``resumable=True`` again;
* ``last_run`` — the last run an index entry names (its round counter and status
  are read from it), so the index never names a run that is gone;
* ``newest`` — among the newest ``N`` runs of its flow (the run's own key, read from
  its own ``created`` event: the ledger's cache is checked against it, never trusted),
  all of them when the flow has fewer;
* ``replaced`` — the key's head an unresolved ``--resume`` started fresh past (its
  ``created`` event names it), while no run has picked it up since;
  ``--include-replaced`` lets it go;
* ``replacing`` — that fresh start itself, while the run it replaced stays: its
  ``created`` event is what says so (deleted, the next prune would let the other go);
* ``recent`` — with ``--older-than``, a run that ended more recently than that;
* ``unreadable`` — a record with no readable ``created`` event: flowdrop cannot
  tell whose it is, so it is left for a person to look at.

Crash safety: each run leaves by one ``rename`` into ``.flowdrop/trash/`` made
under the index lock, after checking again — under that lock — that it is not
pinned, not live and ended. The index is never rewritten: every run it names is
kept, so it stays exact; a run being created (under the same lock) is never seen
half-made. What a kill leaves in the trash is finished by the next prune or
reindex (``trash.sweep``).

Cost: the runs are grouped by the ledger (their first and last lines, read once
per ended run and kept), the index answers the pick-up question per key, and
only the runs deleted are read again: bench/prune.py measures it per run deleted.
"""

from __future__ import annotations

import contextlib
import os
import re
import time
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

from flowdrop_tui.core import defaults
from flowdrop_tui.core.errors import FlowdropError, RecordsUnwritableError, UsageError
from flowdrop_tui.core.files import locks
from flowdrop_tui.core.flows.discovery import FlowRef, describe_cached, resolve_flow
from flowdrop_tui.core.paths import RUN_ID_RE, Layout
from flowdrop_tui.core.records.listing import index, key_runs, pins
from flowdrop_tui.core.records.listing.ledger import Ledger, RunFacts, last_event
from flowdrop_tui.core.records.run_record import trash
from flowdrop_tui.core.records.run_record.folder import NEW_PREFIX
from flowdrop_tui.core.records.run_record.liveness import live_pid
from flowdrop_tui.core.records.run_record.run_fold import list_run_ids, load_run
from flowdrop_tui.core.records.run_record.run_info import ENDED, LIVE, Status
from flowdrop_tui.core.run.start_plan import pick_up_source
from flowdrop_tui.core.times import parse_time

DEFAULT_KEEP = defaults.DEFAULT_KEEP
BATCH = 50  # runs moved to the trash per hold of the index lock (what a starting run may wait)
# A transcript not named after a run (a plugged-in backend's) is an orphan only when
# no run links to it and nothing has written it for this long: it may be being linked.
FOREIGN_GRACE = 3600.0
_RUN_ID_LEN = 27


class Why(StrEnum):
    LIVE = "live"
    PAUSED = "paused"
    PINNED = "pinned"
    PICK_UP = "pick_up"
    LATEST_STATE = "latest_state"  # what a pick-up would use, of a flow that cannot be
    LAST_RUN = "last_run"
    NEWEST = "newest"
    RECENT = "recent"
    REPLACED = "replaced"
    REPLACING = "replacing"
    UNREADABLE = "unreadable"


@dataclass
class Verdict:
    """One run: what it is, and why it stays (no reasons: it goes)."""

    run: str
    flow: str | None
    status: str
    ended: str | None
    bytes: int
    reasons: list[Why] = field(default_factory=list)
    keys: list[str] = field(default_factory=list)  # the keys it is the pick-up/last run of

    def as_json(self) -> dict[str, Any]:
        shown: dict[str, Any] = {
            "run": self.run,
            "flow": self.flow,
            "status": self.status,
            "ended": self.ended,
            "bytes": self.bytes,
        }
        if self.reasons:
            shown["reasons"] = [str(r) for r in self.reasons]
            shown["keys"] = self.keys
        return shown


@dataclass
class Orphan:
    """A transcript under ``.flowdrop/transcripts`` that no run links to."""

    name: str
    bytes: int


@dataclass
class PrunePlan:
    keep: int
    older_than: float | None
    runs: int
    include_replaced: bool = False
    cache_corrected: list[str] = field(default_factory=list)  # runs the cache misnamed
    delete: list[Verdict] = field(default_factory=list)
    kept: list[Verdict] = field(default_factory=list)
    orphans: list[Orphan] = field(default_factory=list)


@dataclass
class PruneResult:
    plan: PrunePlan
    dry_run: bool
    deleted: list[Verdict] = field(default_factory=list)
    skipped: list[tuple[Verdict, str]] = field(default_factory=list)
    orphans_removed: list[Orphan] = field(default_factory=list)
    leftovers_swept: int = 0
    lanes: list[dict[str, Any]] = field(default_factory=list)  # lanes' worktrees dropped

    def as_json(self) -> dict[str, Any]:
        plan = self.plan
        gone = plan.delete if self.dry_run else self.deleted
        orphans = plan.orphans if self.dry_run else self.orphans_removed
        return {
            "dry_run": self.dry_run,
            "keep": plan.keep,
            "older_than": plan.older_than,
            "runs": plan.runs,
            "include_replaced": plan.include_replaced,
            "cache_corrected": plan.cache_corrected,
            "delete": [v.as_json() for v in gone],
            "kept": [v.as_json() for v in plan.kept],
            "skipped": [{**v.as_json(), "why": why} for v, why in self.skipped],
            "orphans": [{"transcript": o.name, "bytes": o.bytes} for o in orphans],
            "bytes": sum(v.bytes for v in gone) + sum(o.bytes for o in orphans),
            "leftovers_swept": self.leftovers_swept,
            "lanes": self.lanes,
        }


_DURATION = re.compile(r"(\d+(?:\.\d+)?)([smhdw])")
_UNIT = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def parse_duration(text: str) -> float:
    """``90m``, ``12h``, ``30d``, ``2w``, ``1d12h`` → seconds."""
    spec = text.strip().lower()
    parts = _DURATION.findall(spec)
    if not spec or "".join(n + u for n, u in parts) != spec:
        raise UsageError(
            f"--older-than {text!r} is not a duration; write a number and a unit "
            "(s, m, h, d, w), e.g. 30d, 12h or 1d12h"
        )
    return sum(float(n) * _UNIT[u] for n, u in parts)


def _epoch(stamp: str | None, run_id: str) -> float:
    """When a run ended (its ISO time), else when it started (its id)."""
    ended = parse_time(stamp)
    if ended is not None:
        return ended.timestamp()
    return datetime.strptime(run_id[:19] + "+0000", "%Y%m%dT%H%M%S.%f%z").timestamp()


def newest_of(runs: list[str], keep: int) -> list[str]:
    """The newest ``keep`` of ``runs`` (oldest first): all of them when there are fewer,
    none for 0. Never a negative slice: ``runs[len(runs) - keep:]`` with ``keep`` past
    ``len(runs)`` counts from the end and kept only ``keep - len(runs)`` of them."""
    if keep <= 0:
        return []
    return runs[max(0, len(runs) - keep) :]


def _protected(layout: Layout) -> dict[str, list[tuple[Why, str]]]:
    """Runs the index names, by run: each key's pick-up source and last run."""
    named: dict[str, list[tuple[Why, str]]] = {}
    keys = sorted(index.load(layout)["keys"])
    stuck = _not_picked_up(layout, keys)
    for key in keys:
        source = pick_up_source(layout, key)  # may rebuild a stale index: read it after
        if source is not None:
            why = Why.LATEST_STATE if key in stuck else Why.PICK_UP
            named.setdefault(source, []).append((why, key))
    for key, entry in sorted(index.load(layout)["keys"].items()):
        state_why = Why.LATEST_STATE if key in stuck else Why.PICK_UP
        for field_, why in (("last_run", Why.LAST_RUN), ("source", state_why)):
            run_id = entry.get(field_)
            if isinstance(run_id, str) and (why, key) not in named.get(run_id, []):
                named.setdefault(run_id, []).append((why, key))
    return named


def _replaced(facts: dict[str, RunFacts]) -> dict[str, tuple[str, str]]:
    """Runs a fresh start looked past as their key's head (an unresolved ``--resume``),
    that no run has picked up since: run → (the key, the fresh start that says so)."""
    picked = {fact.source for fact in facts.values() if fact.source is not None}
    found: dict[str, tuple[str, str]] = {}
    for fact in facts.values():
        gone = fact.replaced
        if gone is not None and gone in facts and gone not in picked and fact.key is not None:
            found.setdefault(gone, (fact.key, fact.run))
    return found


def _not_picked_up(layout: Layout, keys: list[str]) -> set[str]:
    """The keys a plain run would not pick up today: their flow is gone, does
    not load, or does not declare ``resumable`` — as the describe cache knows it (no
    process is started; a flow it does not know yet counts as picked up). Their latest
    state still stays (the flow may say ``resumable=True`` tomorrow), said truthfully."""
    refs: list[FlowRef] = []
    stuck: set[str] = set()
    for key in keys:
        try:
            refs.append(resolve_flow(layout, key, layout.workspace))
        except FlowdropError:
            stuck.add(key)
    for ref, info in zip(refs, describe_cached(layout, refs), strict=True):
        if info is not None and (info.error or info.resumable is False):
            stuck.add(ref.key)
    return stuck


def _verdict(
    fact: RunFacts,
    named: list[tuple[Why, str]],
    pinned: bool,
    newest: bool,
    recent: bool,
) -> Verdict:
    verdict = Verdict(fact.run, fact.key, str(fact.status), fact.ended, fact.bytes)
    reasons = verdict.reasons
    if fact.status in LIVE:
        reasons.append(Why.LIVE)
    elif fact.status == Status.PAUSED:
        reasons.append(Why.PAUSED)
    if fact.key is None:
        reasons.append(Why.UNREADABLE)
    if pinned:
        reasons.append(Why.PINNED)
    for why, key in named:
        if why not in reasons:
            reasons.append(why)
        if key not in verdict.keys:
            verdict.keys.append(key)
    if newest:
        reasons.append(Why.NEWEST)
    if recent:
        reasons.append(Why.RECENT)
    return verdict


def plan_prune(
    layout: Layout,
    keep: int = DEFAULT_KEEP,
    older_than: float | None = None,
    *,
    now: float | None = None,
    ledger: Ledger | None = None,
    include_replaced: bool = False,
) -> PrunePlan:
    """What ``prune`` would delete and why the rest stays; changes nothing but caches."""
    if keep < 0:
        raise UsageError(f"--keep {keep}: keep a number of runs per flow, 0 or more")
    ids = list_run_ids(layout)
    ledger = ledger or Ledger(layout)
    facts = ledger.facts(ids, checked=True)  # keys from the records, not the cache
    named = _protected(layout) if ids else {}
    if not include_replaced:
        for run_id, (key, by) in _replaced(facts).items():
            named.setdefault(run_id, []).append((Why.REPLACED, key))
            named.setdefault(by, []).append((Why.REPLACING, key))
    pinned = pins.pinned(layout)
    by_flow: dict[str | None, list[str]] = {}
    for run_id in ids:
        by_flow.setdefault(facts[run_id].key, []).append(run_id)
    newest = {run_id for runs in by_flow.values() for run_id in newest_of(runs, keep)}
    cutoff = None if older_than is None else (now or time.time()) - older_than
    plan = PrunePlan(keep=keep, older_than=older_than, runs=len(ids))
    plan.include_replaced = include_replaced
    plan.cache_corrected = list(ledger.disagreed)
    for run_id in ids:
        fact = facts[run_id]
        recent = cutoff is not None and _epoch(fact.ended, run_id) > cutoff
        verdict = _verdict(fact, named.get(run_id, []), run_id in pinned, run_id in newest, recent)
        (plan.kept if verdict.reasons else plan.delete).append(verdict)
    plan.orphans = _orphans(layout, set(ids), now or time.time())
    ledger.save(ids)
    return plan


def _orphans(layout: Layout, run_ids: set[str], now: float) -> list[Orphan]:
    """Transcripts no run links to: those named after a run that is gone (one
    ``listdir``), and foreign ones no record links to (only then are links read)."""
    if not trash.keeps_transcripts(layout):
        return []
    try:
        entries = list(os.scandir(layout.transcripts))
    except OSError:
        return []
    found: list[Orphan] = []
    foreign = []
    for entry in entries:
        prefix = entry.name[:_RUN_ID_LEN]
        if RUN_ID_RE.match(prefix) and entry.name[_RUN_ID_LEN : _RUN_ID_LEN + 1] == "-":
            if prefix not in run_ids and not _run_exists(layout, prefix):
                found.append(Orphan(entry.name, _size(entry)))
        else:
            foreign.append(entry)
    if foreign:
        linked = _all_links(layout, run_ids)
        for entry in foreign:
            try:
                idle = now - entry.stat(follow_symlinks=False).st_mtime
            except OSError:
                continue
            if entry.name not in linked and idle > FOREIGN_GRACE:
                found.append(Orphan(entry.name, _size(entry)))
    return found


def _size(entry: os.DirEntry[str]) -> int:
    try:
        regular = entry.is_file(follow_symlinks=False)
        return entry.stat(follow_symlinks=False).st_size if regular else 0
    except OSError:
        return 0


def _run_exists(layout: Layout, run_id: str) -> bool:
    """The run's folder, or the hidden one it is being built in."""
    return os.path.lexists(layout.runs / run_id) or os.path.lexists(
        layout.runs / f"{NEW_PREFIX}{run_id}"
    )


def _all_links(layout: Layout, run_ids: set[str]) -> set[str]:
    """The names under .flowdrop/transcripts that any record links to (reads every run's
    ``sessions/``: only when a transcript not named after a run is there)."""
    names: set[str] = set()
    for run_id in run_ids:
        for target in trash.linked_transcripts(layout, layout.runs / run_id, run_id):
            names.add(target.name)
    return names


def _still_deletable(layout: Layout, verdict: Verdict) -> str | None:
    """Checked under the index lock just before the rename: why it must stay now, if so."""
    run_id = verdict.run
    folder = layout.runs / run_id
    if not os.path.lexists(folder):
        return "gone already"
    if pins.is_pinned(layout, run_id):
        return str(Why.PINNED)
    if live_pid(folder) is not None:
        return str(Why.LIVE)
    last = last_event(folder / "cycle.jsonl")
    if last is not None and last["event"] == "ended":
        return None  # nothing follows `ended`: terminal, by the fold's own rule
    try:
        status = load_run(layout, run_id).status
    except FlowdropError:
        return "unreadable"
    return None if status in ENDED else str(status)


def _discard(layout: Layout, run_id: str) -> bool:
    try:
        return trash.discard(layout, run_id)
    except OSError as exc:
        raise RecordsUnwritableError(
            f"cannot delete run {run_id}: cannot move it into {layout.trash}: "
            f"{exc.strerror or exc}; make .flowdrop/ writable and prune again"
        ) from exc


def _sync_moved(layout: Layout) -> None:
    try:
        trash.sync_moved(layout)
    except OSError as exc:
        raise RecordsUnwritableError(
            f"cannot delete runs: cannot sync {layout.runs}: {exc.strerror or exc}; "
            "nothing was deleted yet (the runs moved to the trash go at the next prune)"
        ) from exc


def _sync_all(layout: Layout) -> None:
    try:
        trash.sync_all(layout)
    except OSError as exc:
        raise RecordsUnwritableError(
            f"cannot make the prune durable: cannot sync {layout.root}: {exc.strerror or exc}"
        ) from exc


def prune(
    layout: Layout,
    keep: int = DEFAULT_KEEP,
    older_than: float | None = None,
    *,
    dry_run: bool = False,
    now: float | None = None,
    include_replaced: bool = False,
) -> PruneResult:
    """Delete what ``plan_prune`` says goes (``dry_run``: only say it)."""
    swept = 0 if dry_run else trash.sweep(layout)  # what a killed prune left
    ledger = Ledger(layout)
    plan = plan_prune(
        layout, keep, older_than, now=now, ledger=ledger, include_replaced=include_replaced
    )
    result = PruneResult(plan=plan, dry_run=dry_run, leftovers_swept=swept)
    # SPEC §23: the worktrees of lanes landed or merged, and clean (no lane: no git call)
    from flowdrop_tui.core.lanes.cleanup import prune_lanes  # git's side: when pruning only

    result.lanes = prune_lanes(layout, dry_run=dry_run)
    if dry_run:
        return result
    for start in range(0, len(plan.delete), BATCH):
        batch = plan.delete[start : start + BATCH]
        moved: list[Verdict] = []
        # A deadline, naming the holder (a process stopped with Ctrl-Z); what
        # earlier batches deleted stays deleted, the rest waits for the next prune.
        with locks.exclusive(layout.index_lock, wait=index.WRITE_WAIT):
            for verdict in batch:
                why = _still_deletable(layout, verdict)
                if why is not None:
                    result.skipped.append((verdict, why))
                elif _discard(layout, verdict.run):
                    moved.append(verdict)
                else:
                    result.skipped.append((verdict, "gone already"))
            if moved:
                _sync_moved(layout)  # gone from runs/ on disk before their folders go
        trash.purge_all(layout, [v.run for v in moved])
        result.deleted.extend(moved)
    # The flows' run lists forget the deleted runs (readers skip them meanwhile, and a
    # lock held too long elsewhere leaves that to the next prune or reindex).
    if result.deleted:
        with (
            contextlib.suppress(locks.LockTimeout),
            locks.exclusive(layout.index_lock, wait=index.WRITE_WAIT),
        ):
            key_runs.compact_locked(layout, {v.flow for v in result.deleted if v.flow})
    ledger.forget({v.run for v in result.deleted})
    ledger.save()
    if result.deleted or swept:
        _sync_all(layout)  # what prune reports is what a power cut right after leaves
    # Looked for again now: the deleted runs' transcripts that no link named go too.
    for orphan in _orphans(layout, set(list_run_ids(layout)), now or time.time()):
        prefix = orphan.name[:_RUN_ID_LEN]
        if RUN_ID_RE.match(prefix) and _run_exists(layout, prefix):
            continue  # a run of that id appeared since (checked again, just before)
        try:
            (layout.transcripts / orphan.name).unlink()
        except OSError:
            continue
        result.orphans_removed.append(orphan)
    return result
