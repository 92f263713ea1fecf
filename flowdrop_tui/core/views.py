"""What the CLI and the UI show: the flow list, a flow's runs, one run in full.

Plain data only. Every function tolerates a broken record: it is shown with
what could be read, never raised as a crash, so one bad run hides nothing else.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Any

from flowdrop_tui.core import defaults, git
from flowdrop_tui.core.errors import (
    FlowdropError,
    InvalidNameError,
    NotFoundError,
    OutputUnreadableError,
)

# The flow list as the first frame shows it, and the threads listed with the flows:
# in a module of their own, which the UI's start imports without this one.
from flowdrop_tui.core.flow_list import absent_threads as _absent_threads
from flowdrop_tui.core.flow_list import graph_threads as _graph_threads
from flowdrop_tui.core.flow_list import quick_flow_rows as quick_flow_rows
from flowdrop_tui.core.flow_list import thread_refs as thread_refs
from flowdrop_tui.core.flow_list import with_lanes
from flowdrop_tui.core.flows.discovery import (
    FlowInfo,
    describe,
    resolve_flow,
)
from flowdrop_tui.core.lanes.known import checkout_of
from flowdrop_tui.core.paths import (
    OUTPUT,
    SESSIONS,
    Layout,
    split_lane,
    validate_flow_name,
    validate_key,
)
from flowdrop_tui.core.records.flow_state.state import read_run_states
from flowdrop_tui.core.records.listing import index, key_runs, pins
from flowdrop_tui.core.records.log.event_log import side_value
from flowdrop_tui.core.records.log.output_log import tail_lines
from flowdrop_tui.core.records.run_record.liveness import live_pid
from flowdrop_tui.core.records.run_record.run_fold import list_run_ids, load_run
from flowdrop_tui.core.records.run_record.run_info import LIVE, TERMINAL, RunInfo, Status
from flowdrop_tui.core.records.run_record.spending import thread_usage
from flowdrop_tui.core.records.spend.budget import ChainBudget, Used, effective
from flowdrop_tui.core.records.spend.usage import Usage, read_usage
from flowdrop_tui.core.records.spend.usage import total as usage_total
from flowdrop_tui.core.run.start_plan import snapshot_of


def flow_rows(layout: Layout, infos: list[FlowInfo] | None = None) -> list[dict[str, Any]]:
    """``flows --json``: every flow with its declaration, round counter and last run
    (a thread run by path: a row of its own, ``by_path``, its key as its name)."""
    data = index.load(layout)
    infos = describe(layout, thread_refs(layout, data)) if infos is None else infos
    infos = with_lanes(infos, data["keys"])  # SPEC §23: a flow's lanes after it
    rows = []
    named = {info.name for info in infos}
    graphs = _graph_threads(data, named)
    absent = _absent_threads(data, named | {info.name for info in graphs})
    for info in [*infos, *graphs, *absent]:
        entry = data["keys"].get(info.name) or {}
        row: dict[str, Any] = {
            "name": info.name,
            "by_path": "/" in info.name,
            "path": info.path,
            "resumable": info.resumable,
            "error": info.error,
            "description": info.description,
            "round": int(entry.get("round") or 0),
            "last_run": entry.get("last_run"),
            "status": entry.get("status"),
            "lane": split_lane(info.name)[1],
        }
        last = entry.get("last_run")
        if isinstance(last, str) and entry.get("status") not in {str(s) for s in TERMINAL}:
            if not (layout.runs / last).is_dir():
                row["status"] = None
            else:
                # Behind its record (a killed run): repaired from the record, and written
                # once the run no longer moves, so a big record is not re-read every time.
                fixed = index.repair(layout, info.name, entry) or entry
                row["round"] = int(fixed.get("round") or 0)
                recorded = fixed.get("status")
                live = recorded in {str(s) for s in LIVE}
                row["status"] = (
                    str(Status.INTERRUPTED)
                    if live and live_pid(layout.runs / last) is None
                    else recorded
                )
        if info in absent and row["status"] not in _LIVE_WORDS:
            continue  # its run is no longer live: a flow not here is not listed for it
        run: RunInfo | None = None
        if isinstance(last, str):
            with contextlib.suppress(FlowdropError):
                run = _last_run(layout, info.name, last)
        # a flow another one called (run.call): its last run is its caller's, counted there
        row["called_by"] = run.key if run is not None and run.key != info.name else None
        row["budget"] = thread_budget(info, run).to_json()
        usage = thread_usage(layout, info.name, last if isinstance(last, str) else None)
        row["usage"] = usage.to_json() if usage is not None else None
        rows.append(row)
    return rows


_LIVE_WORDS = frozenset(str(s) for s in LIVE)


# A run that has ended never changes ("nothing rewrites a record afterwards"): the UI,
# which lists the flows again and again, folds each flow's ended last run once.
_ENDED: dict[tuple[str, str], RunInfo] = {}


def _last_run(layout: Layout, key: str, run_id: str) -> RunInfo:
    held = _ENDED.get((str(layout.root), key))
    if held is not None and held.run == run_id:
        return held
    info = load_run(layout, run_id)  # a big record: only what it appended since
    if info.status in TERMINAL:
        _ENDED[(str(layout.root), key)] = info
    return info


def thread_budget(info: FlowInfo, last: RunInfo | None) -> ChainBudget:
    """The flow's budget as its next pick-up would meet it (SPEC §14): the declared limits
    under the overrides its chain carries, and what the chain of its last run has used
    (a run of another key, or none: nothing yet)."""
    if last is None or last.key != info.name or info.error:
        return ChainBudget(effective(info.budget, {}), Used())
    chain = last.chain_budget()
    return ChainBudget(effective(info.budget, last.budget_overrides), chain.used)


def key_for(layout: Layout, arg: str, cwd: Path | None = None) -> str:
    """The key ``FLOW`` names, whether or not the flow still exists on disk."""
    try:
        return resolve_flow(layout, arg, cwd).key
    except NotFoundError:
        if "/" in arg or os.sep in arg or arg.endswith(".py"):
            given = Path(os.path.abspath((cwd or Path.cwd()) / arg))
            folder = given.parent if given.name.endswith(".py") else given
            try:
                return validate_key(folder.relative_to(layout.workspace).as_posix())
            except ValueError:
                raise InvalidNameError(f"{arg!r} is outside the workspace") from None
        return validate_flow_name(arg)


RUNS_PAGE = defaults.RUNS_PAGE
LOG_PAGE = defaults.LOG_PAGE


def runs_named(
    layout: Layout,
    arg: str,
    cwd: Path | None = None,
    limit: int | None = RUNS_PAGE,
    before: str | None = None,
) -> tuple[str, list[RunInfo], int]:
    """``runs FLOW``: the key FLOW names, its newest runs (``run_page``) and how many it
    has. The runs of a flow whose folder is gone are still listed; a name that is neither
    a flow on disk nor the key of any run is not found (exit 2), as ``run`` says of it."""
    try:
        key = resolve_flow(layout, arg, cwd).key
    except NotFoundError as missing:
        key = key_for(layout, arg, cwd)
        infos, total = run_page(layout, key, limit, before)
        if not total:
            raise NotFoundError(f"{missing.message}; no run has key {key!r} either") from None
        return key, infos, total
    return (key, *run_page(layout, key, limit, before))


def run_page(
    layout: Layout, key: str | None = None, limit: int | None = RUNS_PAGE, before: str | None = None
) -> tuple[list[RunInfo], int]:
    """Runs newest first, of one key when given (the runs whose own key it is): at most
    ``limit`` (``None``: all) older than run ``before``, and how many there are in all.

    A key's page is read from the end of its run list (``key_runs``), so it costs the
    page, not the workspace; a record that cannot be read is left out.
    """
    if key is not None:
        index.key_runs_caught_up(layout, key)  # a list a power cut left behind is rebuilt
        ids = key_runs.newest(layout, key, limit, before)
        total = key_runs.count(layout, key)
    else:
        # Every folder, not the key lists: a run whose record cannot be read names no
        # key, and is still shown here. A directory listing costs little beside the page.
        every = list_run_ids(layout)
        total = len(every)
        if before is not None:
            every = [run_id for run_id in every if run_id < before]
        ids = every[::-1] if limit is None else every[: -limit - 1 : -1]
    found = []
    for run_id in ids:
        try:
            info = load_run(layout, run_id)  # a big record: only what it appended
        except FlowdropError:
            continue
        if key is None or info.key == key:
            found.append(info)
    return found, total


def _link_target(link_path: Path) -> str | None:
    """Where a link in ``sessions/`` points (read, never followed for writing)."""
    try:
        target = os.readlink(link_path)
    except OSError:
        return None
    return target if os.path.isabs(target) else os.path.normpath(link_path.parent / target)


def _in_sessions(link: Any) -> bool:
    """A session link as the engine records it, ``sessions/<name>``: a path read from the
    record is looked at only inside the run's own ``sessions/`` folder."""
    if not isinstance(link, str) or "\\" in link or "\x00" in link:
        return False
    parts = link.split("/")
    return len(parts) == 2 and parts[0] == SESSIONS and parts[1] not in ("", ".", "..")


def sessions_of(info: RunInfo) -> list[dict[str, Any]]:
    """Each session in opening order, with its transcript's health (SPEC §11 ``show``).

    Agents delete their own transcripts (retention), so a target that is gone
    is reported as ``exists: false``, never as an error.
    """
    rows = []
    for opened in info.sessions:
        closed = opened.get("closed") or {}
        link = opened.get("link")
        target = closed.get("target") or opened.get("target")
        if _in_sessions(link):
            on_disk = _link_target(info.path / str(link))
            target = on_disk or target
        exists = isinstance(target, str) and os.path.exists(target)
        usage = Usage.from_json(closed.get("usage"))
        if not closed and exists and isinstance(target, str):
            # Still running: what it has spent so far, read through its transcript.
            usage = read_usage(str(opened.get("backend")), Path(target))
        rows.append(
            {
                "link": link,
                "backend": opened.get("backend"),
                "target": target,
                "exists": exists,
                "session": opened.get("session"),
                "key": opened.get("key"),
                "round": opened.get("round"),
                "command": opened.get("command"),
                "exit_code": closed.get("exit_code"),
                "seconds": closed.get("seconds"),
                "closed": bool(closed),
                "interrupted": bool(closed.get("interrupted")),
                "error": closed.get("error"),
                "usage": usage.to_json() if usage is not None else None,
            }
        )
    return rows


def git_of(layout: Layout, info: RunInfo, *, isolated: bool = False) -> dict[str, Any] | None:
    """The run's git facts and the commits made while it ran; ``None`` outside git.

    A run that ended normally recorded its end facts. A live run is measured to
    HEAD now. A paused or killed run recorded none, so HEAD now is used but
    only commits made up to the run's last recorded event count as its own.
    ``isolated``: read in a child process (``git.isolated``), for long-running callers.
    """
    if not isinstance(info.git_start, dict):
        return None
    start = info.git_start.get("head")
    end = info.git_end.get("head") if isinstance(info.git_end, dict) else None
    until: str | None = None
    if end is None and info.status not in LIVE:
        until = info.last_event  # the ``t`` of its last event (folded: never the record re-read)
    # No recorded end: measured to HEAD, or to the commits its worker pushed (a remote
    # run's own, ``git.RUN_REFS``; the run's last event then cuts nothing off).
    tree = checkout_of(layout, info.key)  # a lane's commits are its worktree's (SPEC §23)
    if isolated:
        ask = (start or "", end or "HEAD", until or "", info.run)
        found = git.isolated(tree, "commits", *ask)
        commits = found if isinstance(found, list) else []
    else:
        if end is None:
            end, pushed = git.run_end(tree, info.run)
            until = None if pushed else until
        commits = git.commits_between(tree, start, end, until=until)
    return {"start": info.git_start, "end": info.git_end, "commits": commits}


def run_detail(layout: Layout, run_id: str) -> dict[str, Any]:
    """``show RUN --json``: the ``runs`` fields plus state, sessions, git, error, result."""
    info = load_run(layout, run_id)
    detail = info.summary()
    try:
        states = read_run_states(info.path)
        detail["state"] = states
        detail["state_error"] = None
    except FlowdropError as exc:
        detail["state"] = None
        detail["state_error"] = exc.message
    detail["sessions"] = sessions_of(info)
    usage = usage_total(Usage.from_json(row["usage"]) for row in detail["sessions"])
    detail["usage"] = usage.to_json() if usage is not None else None
    detail["git"] = git_of(layout, info)
    detail["error"] = info.error
    detail["result"] = side_value(info.path, info.result)  # a big one: from its side file
    detail["position"] = info.position
    detail["warnings"] = info.warnings
    detail["state_refused"] = info.state_refused  # SPEC §5.3: saves that left a value out
    detail["budget_reached"] = info.budget_reached
    detail["limit_reached"] = info.limit_reached if info.status == Status.PAUSED else None
    detail["called"] = info.called
    detail["pid"] = info.live_pid
    detail["flow_path"] = info.flow
    detail["pinned"] = pins.is_pinned(layout, run_id)
    detail.update(output_tail(info))
    return detail


def output_tail(info: RunInfo) -> dict[str, Any]:
    """``show``'s view of ``output.log``: its last lines (``output_tail``), whether earlier
    ones were left out (``output_more``), and why it could not be read (``output_error``)."""
    try:
        lines, more = tail_lines(info.path / OUTPUT)
    except OutputUnreadableError as exc:
        return {"output_tail": [], "output_more": False, "output_error": exc.message}
    return {"output_tail": lines, "output_more": more, "output_error": None}


def state_view(layout: Layout, info: RunInfo) -> dict[str, Any]:
    """The run's ``state.json`` and, for its own key, what changed since the run it was
    picked up from: ``changes`` is ``{"added", "changed", "removed"}`` (``changed`` maps a
    key to ``[before, now]``), or ``None`` with ``changes_error`` saying why it cannot be told."""
    view: dict[str, Any] = {"key": info.key, "source": info.source, "state": None, "error": None}
    view.update(changes=None, changes_error=None)
    try:
        view["state"] = read_run_states(info.path)
    except FlowdropError as exc:
        view["error"] = exc.message
        return view
    if not info.source or info.key is None:
        view["changes_error"] = "a fresh start: nothing was picked up"
        return view
    try:
        before_all = read_run_states(layout.run_dir(info.source))
    except FlowdropError as exc:
        view["changes_error"] = exc.message
        return view
    before = before_all.get(info.key)
    now = view["state"].get(info.key)
    if not isinstance(before, dict) or not isinstance(now, dict):
        view["changes_error"] = f"run {info.source} holds no state for {info.key}"
        return view
    view["changes"] = {
        "added": {k: v for k, v in now.items() if k not in before},
        "changed": {k: [before[k], v] for k, v in now.items() if k in before and before[k] != v},
        "removed": {k: v for k, v in before.items() if k not in now},
    }
    return view


def run_snapshot(layout: Layout, run_id: str) -> dict[str, Any]:
    """``snapshot RUN``: the run's state in the FlowDrop shape (SPEC §7)."""
    info = load_run(layout, run_id)
    return snapshot_of(info, read_run_states(info.path))
