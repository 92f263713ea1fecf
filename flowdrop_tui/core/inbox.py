"""The inbox (SPEC §21): everything that waits on a person, each with its one action and
the exact command for it — and the notices of what a died run could not send itself.

Read from the index (``index.json``: each key's last run and its status), so it costs
the number of flows, never the number of runs: only a key whose last run is not
``completed``/``cancelled`` has that one run folded (``folded``: a big record only
from where it was last read). Items a person dismissed are kept out through
``.flowdrop/inbox.json`` (``{"v": 1, "dismissed": [id, …]}``; written atomically,
under ``inbox.lock``, links refused).

An item: ``{"id", "kind", "run", "flow", "message", "at", "action", "command"}``;
``id`` is ``<run>/<name>``, the same as its notice's (``control.notify``). A notice no
sink took after its retries is an item too (kind ``undelivered``, from
``notices/undelivered/``: ``control.notice_retries``), dismissed like any other.
"""

from __future__ import annotations

import contextlib
import os
from typing import Any

import orjson

from flowdrop_tui.core.control import notice_retries, notify
from flowdrop_tui.core.errors import FlowdropError, NotFoundError
from flowdrop_tui.core.files import locks
from flowdrop_tui.core.files.atomic import write_atomic
from flowdrop_tui.core.paths import Layout, refuse_link
from flowdrop_tui.core.records.listing import index
from flowdrop_tui.core.records.run_record import run_fold
from flowdrop_tui.core.records.run_record.run_info import RunInfo, Status
from flowdrop_tui.core.records.spend.budget import between
from flowdrop_tui.core.times import now_iso

LONG_WAIT = 600.0  # a usage-limit wait longer than this (seconds) is an inbox item
QUIET = frozenset({str(Status.COMPLETED), str(Status.CANCELLED)})
INBOX_VERSION = 1


def items(layout: Layout, *, send: bool = True, now: str | None = None) -> list[dict[str, Any]]:
    """What waits on a person, newest first; ``send``: also send the notice of each item
    no one has sent yet (a run that died sends nothing itself: the first viewer does)."""
    now = now or now_iso()
    dismissed = set(_dismissed(layout))
    found: list[dict[str, Any]] = []
    for key, entry in sorted(index.load(layout)["keys"].items()):
        run_id = entry.get("last_run")
        if not isinstance(run_id, str) or entry.get("status") in QUIET:
            continue
        try:
            info = run_fold.load_run(layout, run_id)
        except FlowdropError:
            continue
        if info.key != key:
            continue  # a called flow's key: its caller's run is listed under the caller
        found += [item for item in _items_of(info, now) if item["id"] not in dismissed]
    found += [i for i in notice_retries.undelivered(layout) if i["id"] not in dismissed]
    found.sort(key=lambda item: str(item["at"]), reverse=True)
    if send:
        _send(layout, found)
    return found


def _item(
    info: RunInfo, name: str, kind: str, message: str, at: Any, action: str, command: str
) -> dict[str, Any]:
    return {
        "id": f"{info.run}/{name}",
        "kind": kind,
        "run": info.run,
        "flow": info.key,
        "message": message,
        "at": at,
        "action": action,
        "command": command,
    }


def _items_of(info: RunInfo, now: str) -> list[dict[str, Any]]:
    run, key, stretch = info.run, info.key, info.stretch
    if info.status == Status.PAUSED:
        gate = info.open_gate
        if gate is not None:
            choices = gate.get("choices")
            listed = f" [{' / '.join(choices)}]" if isinstance(choices, list) else ""
            action, command = "answer", f"flowdrop-tui answer {run} ANSWER --gate {gate['id']}"
            if info.flow == index.GRAPH_FLOW:  # a LangGraph interrupt(): the graph answers
                action = "resume the graph with the answer"
                config = {"configurable": {"thread_id": key}}
                command = f"graph.invoke(Command(resume=ANSWER), {config!r})"
            item = _item(
                info,
                f"gate-{gate['id']}",
                "gate",
                f"{gate['question']}{listed}",
                gate["opened"],
                action,
                command,
            )
            return [{**item, "gate": gate["id"], "choices": choices}]
        cause = info.pause_cause or {}
        kind = str(cause.get("event") or "")
        at = cause.get("t")
        if kind == "budget_reached":
            budget, limit = cause.get("budget"), cause.get("limit")
            higher = _higher(limit)
            said = f"budget reached: {budget} {cause.get('used')} used of {limit}"
            command = f"flowdrop-tui resume {run} --max-{budget} {higher}"
            return [
                _item(
                    info,
                    f"budget-{stretch}",
                    kind,
                    said,
                    at,
                    "raise the budget and resume",
                    command,
                )
            ]
        if kind == "limit_reached":
            said = f"{cause.get('backend')}'s usage limit until {cause.get('until') or 'unknown'}"
        elif kind in ("stalled", "same_failure"):
            said = "no progress" if kind == "stalled" else "the same failure again and again"
            rounds = cause.get("rounds")  # the rounds compared (SPEC §20), or their count
            count = len(rounds) if isinstance(rounds, list) else rounds
            said += f" for {count} rounds" if isinstance(count, int) else ""
            if kind == "same_failure" and cause.get("error"):
                said += f": {cause['error']}"  # the last failed session's words (SPEC §20)
        else:
            return []  # paused by a person: nothing waits on another
        command = f"flowdrop-tui resume {run}"
        return [_item(info, f"{kind}-{stretch}", kind, said, at, "resume", command)]
    if info.status == Status.RUNNING and info.waiting is not None:
        since = info.waiting.get("since")
        if between(since, now) >= LONG_WAIT:
            backend, until = info.waiting.get("backend"), info.waiting.get("until") or "unknown"
            said = f"waiting for {backend}'s usage limit until {until}"
            name = f"limit_wait-{stretch}-{str(since).translate({ord(c): None for c in ':-.'})}"
            return [
                _item(
                    info,
                    name,
                    "limit_wait",
                    said,
                    since,
                    "dismiss",
                    f"flowdrop-tui inbox --dismiss {run}/{name}",
                )
            ]
        return []
    if info.status == Status.FAILED:
        error = info.error if isinstance(info.error, dict) else {}
        said = f"failed: {error.get('message') or 'the flow failed'}"[:300]
        return [
            _item(
                info,
                f"failed-{stretch}",
                "failed",
                said,
                info.ended,
                "pick up",
                f"flowdrop-tui run {key}",
            )
        ]
    if info.status == Status.INTERRUPTED:
        said = "interrupted: no process holds it (killed, or its machine went down)"
        return [
            _item(
                info,
                f"interrupted-{stretch}",
                "interrupted",
                said,
                info.last_event,
                "pick up",
                f"flowdrop-tui run {key}",
            )
        ]
    return []


def _higher(limit: Any) -> Any:
    """A suggested higher limit: twice the one reached."""
    if isinstance(limit, bool) or not isinstance(limit, int | float):
        return "N"
    return limit * 2


def _send(layout: Layout, found: list[dict[str, Any]]) -> None:
    settings = notify.settings(layout)
    if not settings.sends:
        return
    with contextlib.suppress(OSError):
        if notify.pending(layout):  # retries whose sender died: one takes them up
            notify.start_sender(layout)
    for item in found:
        if item["kind"] == "undelivered":
            continue  # a notice about a notice: never sent
        run_dir = layout.runs / item["run"]
        name = item["id"].split("/", 1)[1]
        if notify.sent(run_dir, name):
            continue
        body = {k: item[k] for k in ("id", "run", "flow", "kind", "message")} | {"at": now_iso()}
        with contextlib.suppress(OSError):
            notify.announce(layout, run_dir, name, body, settings)


# -- inbox.json: what was dismissed ---------------------------------------------------


def _path(layout: Layout) -> Any:
    return layout.root / "inbox.json"


def _dismissed(layout: Layout) -> list[str]:
    path = _path(layout)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return []
    try:
        data = orjson.loads(os.read(fd, 16 << 20))
    except (OSError, orjson.JSONDecodeError):
        return []
    finally:
        os.close(fd)
    listed = data.get("dismissed") if isinstance(data, dict) else None
    return [i for i in listed if isinstance(i, str)] if isinstance(listed, list) else []


def dismiss(layout: Layout, ids: list[str]) -> list[str]:
    """Keep ``ids`` out of the inbox from now on; each must be an item it lists now.
    Ids of runs that no longer exist are forgotten as the file is written."""
    listed = {item["id"] for item in items(layout, send=False)}
    unknown = [i for i in ids if i not in listed]
    if unknown:
        raise NotFoundError(
            f"no inbox item {', '.join(unknown)} (list them with: flowdrop-tui inbox)"
        )
    layout.ensure()
    with locks.exclusive(layout.root / "inbox.lock", wait=5.0):
        path = _path(layout)
        refuse_link(path)
        kept = [i for i in _dismissed(layout) if (layout.runs / i.split("/", 1)[0]).is_dir()]
        kept += [i for i in ids if i not in kept]
        write_atomic(path, orjson.dumps({"v": INBOX_VERSION, "dismissed": kept}))
    return ids
