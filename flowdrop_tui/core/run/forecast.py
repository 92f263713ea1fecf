"""What ``run`` (or ``resume``) would do, decided once: the answer ``plan`` prints, the UI's
pick-up preview shows, and ``open_run`` then acts on (SPEC §15).

Beside start resolution (``start_plan.py``, SPEC §7) it works out what a start carries
and what it would meet: the budget the chain runs under and what it has used
(§14), what drifted since the run being picked up or resumed (§15), and the
refusal, if any, with its code and exit status. It never writes anything. A
refusal is returned in data, not raised, so a preview can show it; ``open_run``
raises it before any run exists.

Refusals come in the order ``run`` meets them: the flow cannot load; the key is
held by a live run; start resolution (§7); a budget exhausted; drift under
``--strict``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from flowdrop_tui.core.control.verbs import check_resumable
from flowdrop_tui.core.errors import (
    BudgetExhaustedError,
    DriftedError,
    FlowdropError,
    FlowLoadError,
)
from flowdrop_tui.core.flows.discovery import (
    FlowInfo,
    FlowRef,
    content_hash,
    describe_one,
    resolve_flow,
)
from flowdrop_tui.core.lanes.known import checkout_of
from flowdrop_tui.core.paths import Layout
from flowdrop_tui.core.records.flow_state.state import read_run_states
from flowdrop_tui.core.records.run_record.run_fold import load_run
from flowdrop_tui.core.records.run_record.run_info import RunInfo
from flowdrop_tui.core.records.spend.budget import ChainBudget, Limits, Reached, Used, effective
from flowdrop_tui.core.run.creation import key_is_taken, key_taken
from flowdrop_tui.core.run.drift import Drift, GitReader, drift_from
from flowdrop_tui.core.run.start_plan import StartPlan, plan


@dataclass(frozen=True)
class StartOptions:
    """What ``run`` was asked: SPEC §7's choice, the ``--max-…`` overrides, ``--strict``."""

    snapshot: Path | None = None
    resume: str | None = None
    from_run: str | None = None
    fresh: bool = False
    limits: Limits = field(default_factory=dict)  # --max-… given (None: no limit)
    strict: bool = False
    limit_wait: float | None = None  # --limit-wait, seconds (SPEC §19); None: the flow's


@dataclass
class Forecast:
    """What a start would do, or the refusal it would meet."""

    key: str
    start: str = "fresh"  # "fresh" | "thread" | "from" | "snapshot" | "resume"
    plan: StartPlan | None = None
    source: RunInfo | None = None  # the run picked up from, or the paused run resumed
    source_id: str | None = None  # as start resolution named it (a snapshot's runId too)
    source_status: str | None = None
    next_round: int | None = None
    item_index: int | None = None  # a resumed batch's next item
    state_keys: list[str] = field(default_factory=list)
    budget: ChainBudget | None = None
    overrides: Limits = field(default_factory=dict)  # carried on along the chain
    carried: Used = field(default_factory=Used)  # the chain's totals before a new run
    drift: Drift | None = None
    flow_digest: str | None = None
    git_now: dict[str, Any] | None = None
    refusal: FlowdropError | None = None
    start_warnings: list[str] = field(default_factory=list)

    @property
    def resume(self) -> str | None:
        return self.source.run if self.start == "resume" and self.source else None

    @property
    def warnings(self) -> list[str]:
        """Everything ``run`` would warn of: start resolution's, then drift's."""
        drift = self.drift.messages() if self.drift is not None else []
        return [*self.start_warnings, *drift]

    def budget_record(self, *, new_run: bool) -> dict[str, Any]:
        """The ``budget`` field of a ``created`` (``new_run``) or ``resumed`` event."""
        assert self.budget is not None
        record: dict[str, Any] = {"limits": self.budget.limits, "overrides": self.overrides}
        if new_run:
            record["carried"] = self.carried.to_record()
        return record

    def to_json(self) -> dict[str, Any]:
        """``plan --json``."""
        refusal = self.refusal
        return {
            "flow": self.key,
            "start": None if refusal is not None and self.plan is None else self.start,
            "source": self.source_id,
            "source_status": self.source_status,
            "next_round": self.next_round,
            "item_index": self.item_index,
            "state_keys": self.state_keys,
            "budget": self.budget.to_json() if self.budget is not None else None,
            "drift": self.drift.to_json() if self.drift is not None else None,
            "warnings": self.warnings,
            "fork": self.plan.fork if self.plan is not None else None,
            "replaced": self.plan.replaced if self.plan is not None else None,
            "refusal": None
            if refusal is None
            else {"code": refusal.code, "message": refusal.message, "exit": refusal.exit_code},
        }


def runnable(layout: Layout, ref: FlowRef) -> FlowInfo:
    """The flow described in a child process (SPEC §3), refused when it cannot load:
    exit 1, naming the file and line, before anything else happens."""
    described = describe_one(layout, ref)
    if described.error:
        raise FlowLoadError(f"{ref.key} cannot be loaded, so it cannot run: {described.error}")
    return described


def forecast_flow(
    layout: Layout,
    arg: str,
    options: StartOptions,
    *,
    cwd: Path | None = None,
    isolated: bool = False,
) -> Forecast:
    """``plan FLOW``: resolve ``FLOW`` as ``run`` does, describe it in a child (its
    declaration as it is today), and say what ``run`` with ``options`` would do."""
    try:
        ref = resolve_flow(layout, arg, cwd)
    except FlowdropError as exc:
        return Forecast(key=arg, refusal=exc)
    try:
        described = runnable(layout, ref)
    except FlowdropError as exc:
        return Forecast(key=ref.key, refusal=exc)
    return forecast_start(
        layout,
        ref.key,
        ref.folder,
        resumable=bool(described.resumable),
        declared=described.budget,
        options=options,
        isolated=isolated,
    )


def forecast_start(
    layout: Layout,
    key: str,
    folder: Path,
    *,
    resumable: bool,
    declared: Limits,
    options: StartOptions,
    holding_key: bool = False,
    isolated: bool = False,
) -> Forecast:
    """What ``run KEY`` with ``options`` would do. ``holding_key``: the caller holds the
    key's lock (``open_run``); else a live run holding it is the refusal."""
    found = Forecast(key=key, flow_digest=content_hash(folder))
    if not holding_key and key_is_taken(layout, key):
        found.refusal = key_taken(layout, key)
        return found
    try:
        start = plan(
            layout,
            key,
            resumable=resumable,
            snapshot=options.snapshot,
            resume=options.resume,
            from_run=options.from_run,
            fresh=options.fresh,
            strict=options.strict,
        )
    except FlowdropError as exc:
        found.refusal = exc
        return found
    found.plan = start
    found.start_warnings = list(start.warnings)
    found.source_id, found.source_status = start.source, start.source_status
    if start.resume is not None:
        try:
            paused = check_resumable(layout, start.resume)
        except FlowdropError as exc:
            found.refusal = exc
            return found
        return _resuming(found, layout, paused, declared, options, isolated)
    found.start = start.start
    found.next_round = start.first_round
    found.state_keys = sorted(start.state)
    if start.position is not None and isinstance(start.position.get("iterator"), int):
        found.item_index = start.position["iterator"]
    source = _source_of(layout, start)
    found.source = source
    if source is not None and source.key == key:
        # A pick-up continues the chain: its count and its overrides go on.
        found.carried = source.chain_budget().used
        found.overrides = {**source.budget_overrides, **options.limits}
    else:
        found.overrides = dict(options.limits)  # fresh, a snapshot, another key's run
        if start.budget_used is not None:
            found.carried = start.budget_used  # a snapshot's chain use goes on with it
    found.budget = ChainBudget(effective(declared, found.overrides), found.carried)
    if source is not None:
        reader = GitReader(checkout_of(layout, key), isolated)  # a lane's own (SPEC §23)
        found.git_now = reader.facts()
        # A caller's run (another key) recorded its own flow's digest: not comparable.
        digest = found.flow_digest if source.key == key else None
        found.drift = drift_from(source, digest, reader, found.git_now)
    return _refusals(found, options, resuming=False)


def forecast_resume(
    layout: Layout,
    run_id: str,
    folder: Path,
    *,
    declared: Limits,
    options: StartOptions,
    isolated: bool = False,
) -> Forecast:
    """What ``resume RUN`` with ``options`` (``--max-…``, ``--strict``) would do."""
    found = Forecast(key="", flow_digest=content_hash(folder))
    try:
        paused = check_resumable(layout, run_id)
    except FlowdropError as exc:
        found.refusal = exc
        return found
    found.key = paused.key or ""
    return _resuming(found, layout, paused, declared, options, isolated)


def _resuming(
    found: Forecast,
    layout: Layout,
    paused: RunInfo,
    declared: Limits,
    options: StartOptions,
    isolated: bool,
) -> Forecast:
    """SG-12 clause 3: the paused run continues; its chain's count and limits go on."""
    found.start = "resume"
    found.source = paused
    # SPEC §21: a question's round runs again, as itself: no new round for the budget
    found.next_round = paused.next_round
    again = found.next_round == paused.round
    found.item_index = paused.position.get("iterator")
    found.source_id, found.source_status = paused.run, str(paused.status)
    try:
        own = read_run_states(paused.path).get(paused.key or "")
        found.state_keys = sorted(own) if isinstance(own, dict) else []
    except FlowdropError:
        found.state_keys = []
    found.overrides = {**paused.budget_overrides, **options.limits}
    found.carried = paused.budget_carried
    used = paused.chain_budget().used
    found.budget = ChainBudget(effective(declared, found.overrides), used)
    reader = GitReader(checkout_of(layout, paused.key), isolated)
    found.git_now = reader.facts()
    found.drift = drift_from(paused, found.flow_digest, reader, found.git_now)
    return _refusals(found, options, resuming=True, again=again)


def _source_of(layout: Layout, start: StartPlan) -> RunInfo | None:
    """The local run a pick-up carries state from (none for fresh or a snapshot)."""
    if start.start not in ("thread", "from") or start.source is None:
        return None
    try:
        return load_run(layout, start.source)
    except FlowdropError:
        return None


def _refusals(
    found: Forecast, options: StartOptions, *, resuming: bool, again: bool = False
) -> Forecast:
    assert found.budget is not None
    reached = found.budget.reached(skip=("rounds",) if again else ())
    if reached is not None:
        found.refusal = BudgetExhaustedError(_exhausted_words(found, reached, resuming))
        return found
    if options.strict and found.drift is not None and found.drift.drifted:
        assert found.source is not None
        what = "; ".join(found.drift.messages())
        fresh = "" if resuming else ", or start over with --fresh"
        found.refusal = DriftedError(
            f"refused under --strict: {what}. Look at what changed, then run again "
            f"without --strict to go on anyway{fresh}"
        )
    return found


def _exhausted_words(found: Forecast, reached: Reached, resuming: bool) -> str:
    flag = f"--max-{reached.budget}"
    unit = "" if reached.budget != "minutes" else " minutes"
    used = f"{reached.budget} budget: {reached.used}{unit} used of {reached.limit}"
    if resuming and found.source is not None:
        again = f"flowdrop-tui resume {found.source.run} {flag} N"
        return (
            f"run {found.source.run} of {found.key} is out of budget ({used}); "
            f"raise it to go on: {again}"
        )
    return (
        f"{found.key} is out of budget along its chain ({used}); "
        f"raise it with {flag} N, or start a new count with --fresh"
    )
