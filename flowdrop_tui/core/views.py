"""What the CLI and the UI show: the flow list, a flow's runs, one run in full.

Plain data only. Every function tolerates a broken record: it is shown with
what could be read, never raised as a crash, so one bad run hides nothing else.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from . import git, index
from .errors import FlowdropError, InvalidNameError, NotFoundError
from .flows import FlowInfo, FlowRef, describe, discover, resolve_flow
from .paths import CYCLE, SESSIONS, STATE, Layout, validate_flow_name, validate_key
from .records import (
    LIVE,
    TERMINAL,
    RunInfo,
    list_run_ids,
    load_run,
    read_events,
    read_first_event,
)
from .start import snapshot_of
from .state import read_states


def flow_rows(layout: Layout, infos: list[FlowInfo] | None = None) -> list[dict[str, Any]]:
    """``flows --json``: every flow with its declaration, round counter and last run."""
    refs = discover(layout)
    infos = describe(layout, refs) if infos is None else infos
    data = index.load(layout)
    rows = []
    for info in infos:
        entry = data["keys"].get(info.name) or {}
        row: dict[str, Any] = {
            "name": info.name,
            "path": info.path,
            "resumable": info.resumable,
            "error": info.error,
            "description": info.description,
            "round": int(entry.get("round") or 0),
            "last_run": entry.get("last_run"),
            "status": entry.get("status"),
        }
        last = entry.get("last_run")
        if isinstance(last, str) and entry.get("status") not in {str(s) for s in TERMINAL}:
            try:
                run = load_run(layout, last)
                row["status"] = str(run.status)
                row["round"] = run.key_rounds.get(info.name, row["round"])
            except FlowdropError:
                row["status"] = None
        rows.append(row)
    return rows


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


def run_rows(layout: Layout, key: str | None = None) -> list[RunInfo]:
    """Runs newest first, of one key when given (the runs whose own key it is)."""
    found = []
    for run_id in reversed(list_run_ids(layout)):
        if key is not None:
            first = read_first_event(layout.runs / run_id / CYCLE)
            if first is not None and first.get("event") == "created" and first.get("key") != key:
                continue  # the cheap test: most runs are told apart by their first line
        try:
            info = load_run(layout, run_id)
        except FlowdropError:
            continue
        if key is None or info.key == key:
            found.append(info)
    return found


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


def _sessions(info: RunInfo) -> list[dict[str, Any]]:
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
            }
        )
    return rows


def _git(layout: Layout, info: RunInfo) -> dict[str, Any] | None:
    """The run's git facts and the commits made while it ran; ``None`` outside git.

    A run that ended normally recorded its end facts. A live run is measured to
    HEAD now. A paused or killed run recorded none, so HEAD now is used but
    only commits made up to the run's last recorded event count as its own.
    """
    if not isinstance(info.git_start, dict):
        return None
    start = info.git_start.get("head")
    end = info.git_end.get("head") if isinstance(info.git_end, dict) else None
    until: str | None = None
    if end is None:
        end = git.head(layout.workspace)
        if info.status not in LIVE:
            events = read_events(info.path / CYCLE)
            until = events[-1].get("t") if events else None
    return {
        "start": info.git_start,
        "end": info.git_end,
        "commits": git.commits_between(layout.workspace, start, end, until=until),
    }


def run_detail(layout: Layout, run_id: str) -> dict[str, Any]:
    """``show RUN --json``: the ``runs`` fields plus state, sessions, git, error, result."""
    info = load_run(layout, run_id)
    detail = info.summary()
    try:
        states = read_states(info.path / STATE)
        detail["state"] = states
        detail["state_error"] = None
    except FlowdropError as exc:
        detail["state"] = None
        detail["state_error"] = exc.message
    detail["sessions"] = _sessions(info)
    detail["git"] = _git(layout, info)
    detail["error"] = info.error
    detail["result"] = info.result
    detail["position"] = info.position
    detail["warnings"] = info.warnings
    detail["called"] = info.called
    detail["pid"] = info.live_pid
    detail["flow_path"] = info.flow
    return detail


def run_snapshot(layout: Layout, run_id: str) -> dict[str, Any]:
    """``snapshot RUN``: the run's state in the FlowDrop shape (SPEC §7)."""
    info = load_run(layout, run_id)
    return snapshot_of(info, read_states(info.path / STATE))


def flow_ref_or_none(layout: Layout, name: str) -> FlowRef | None:
    try:
        return resolve_flow(layout, name)
    except FlowdropError:
        return None
