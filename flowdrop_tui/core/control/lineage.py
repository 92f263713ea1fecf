"""Which processes belong to a run's tree, read from ``/proc`` (SPEC §21: a run never
answers its own question).

A run marks its process with ``RUN_ENV`` (its id) before the flow runs, so every
descendant — a session's agent, a detached grandchild that called ``setsid`` and
outlived the run — inherits it; ``/proc/PID/environ`` keeps a process's environment
as it was exec'd, so a child that clears its own copy still shows it. The run also
records its pid, group, session and start time (``started``/``resumed``), so an
answering process whose group or session is one the run led is known too, as is any
process whose ancestry reaches a process that held the run.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

RUN_ENV = "FLOWDROP_RUN_ID"  # the id of the run whose tree a process belongs to
_ENVIRON_MAX = 1 << 20


@dataclass(frozen=True)
class Proc:
    pid: int
    ppid: int
    pgid: int
    sid: int
    start: int  # clock ticks after boot: with the pid, who a process is


def proc(pid: int) -> Proc | None:
    """A process's facts, or None when it is gone (or /proc cannot say)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            raw = handle.read()
    except OSError:
        return None
    fields = raw[raw.rfind(b")") + 2 :].split()  # the name may hold spaces and parens
    try:
        return Proc(pid, int(fields[1]), int(fields[2]), int(fields[3]), int(fields[19]))
    except (IndexError, ValueError):
        return None


def own_facts() -> dict[str, Any]:
    """This process, as a run records it: pid, group, session, start time."""
    me = proc(os.getpid())
    return {
        "pid": os.getpid(),
        "pgid": os.getpgrp(),
        "sid": os.getsid(0),
        "start": me.start if me is not None else None,
    }


def ancestry(pid: int | None = None) -> list[Proc]:
    """``pid`` (this process by default) and every ancestor up to init, nearest first."""
    chain: list[Proc] = []
    current = os.getpid() if pid is None else pid
    seen: set[int] = set()
    while current > 0 and current not in seen:
        seen.add(current)
        found = proc(current)
        if found is None:
            break
        chain.append(found)
        current = found.ppid
    return chain


def environ_value(pid: int, name: str) -> str | None:
    """``name`` in the environment ``pid`` was exec'd with (this process: its own now)."""
    if pid == os.getpid():
        return os.environ.get(name)
    try:
        with open(f"/proc/{pid}/environ", "rb") as handle:
            raw = handle.read(_ENVIRON_MAX)
    except OSError:
        return None
    prefix = name.encode() + b"="
    for item in raw.split(b"\0"):
        if item.startswith(prefix):
            return item[len(prefix) :].decode(errors="replace")
    return None


def in_run_tree(run_id: str, holders: list[dict[str, Any]]) -> str | None:
    """Why this process belongs to the tree of run ``run_id`` (whose holding processes
    are ``holders``: ``{pid, pgid, sid, start}``), or None when it does not.

    Looked at for this process and each ancestor: the run's mark in its environment;
    being a process that held the run (pid and start time); being in a process group
    or session that a holder led (a foreground run's terminal session is not one)."""
    held = {(h.get("pid"), h.get("start")) for h in holders if isinstance(h.get("pid"), int)}
    led_groups = {
        h["pid"] for h in holders if isinstance(h.get("pid"), int) and h.get("pgid") == h["pid"]
    }
    led_sessions = {
        h["pid"] for h in holders if isinstance(h.get("pid"), int) and h.get("sid") == h["pid"]
    }
    for found in ancestry():
        if environ_value(found.pid, RUN_ENV) == run_id:
            return f"process {found.pid} carries the run's mark ({RUN_ENV})"
        if (found.pid, found.start) in held:
            return f"process {found.pid} is the run's own"
        if found.sid in led_sessions and _led_by_run(found.sid, holders):
            return f"process {found.pid} is in the run's session {found.sid}"
        if found.pgid in led_groups and _led_by_run(found.pgid, holders):
            return f"process {found.pid} is in the run's process group {found.pgid}"
    return None


def _led_by_run(leader: int, holders: list[dict[str, Any]]) -> bool:
    """A group or session id names the run's only while its leader is the run's process
    or gone (a pid reused for a new leader is someone else's)."""
    now = proc(leader)
    if now is None:
        return True
    return any(h.get("pid") == leader and h.get("start") == now.start for h in holders)
