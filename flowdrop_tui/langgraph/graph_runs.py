"""A graph's runs as flowdrop runs of its thread's key (SPEC §22).

The first root checkpoint a process puts on a thread opens a run of that key, as
``flowdrop-tui run`` would: the key's lock (one live run per key), ``live.lock``, a
``created`` event picking up from the key's last run (its round counter goes on), and
``started``. Each root checkpoint is a round boundary: super-step ``s`` is round
``s + 1`` (``round_started``, ``round_ended``), and ``state.json`` holds the channel
values (replaced at most every ``STATE_EVERY`` seconds, and as the run ends). A run
whose key's last run is *paused* (a graph stopped at ``interrupt()``) is
that run resumed: the same record goes on (``resumed``).

The run ends when the process lets it go (``close``, or at exit): ``paused`` when the
graph's last checkpoint waits on an ``interrupt()``, ``failed`` when a task failed,
else ``completed``; a killed process leaves it ``interrupted``, as any run. A stop
asked of the run (``flowdrop-tui stop``, escape) is taken at the next checkpoint: the
run ends ``cancelled`` and the graph is stopped by ``GraphStopped`` raised from
``put``. While another process holds the key, this one's checkpoints go to the
thread's log only (docs/decisions.md, "LangGraph runs").
"""

from __future__ import annotations

import atexit
import contextlib
import os
import secrets
import socket
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from flowdrop_tui.core import git
from flowdrop_tui.core.control import requests
from flowdrop_tui.core.control.lineage import own_facts
from flowdrop_tui.core.errors import AlreadyRunningError, FlowdropError, RefusedError
from flowdrop_tui.core.files import locks
from flowdrop_tui.core.files.atomic import write_atomic
from flowdrop_tui.core.paths import CYCLE, LIVE_LOCK, REQUESTS, STATE, Layout, new_run_id
from flowdrop_tui.core.records.flow_state.state import encode_states
from flowdrop_tui.core.records.listing import index
from flowdrop_tui.core.records.log.event_log import RECORD_VERSION, EventLog, who
from flowdrop_tui.core.records.run_record.run_fold import fold_run
from flowdrop_tui.core.records.run_record.run_info import Status
from flowdrop_tui.core.records.run_record.spending import chain_usage_field
from flowdrop_tui.core.run.creation import create_record, take_key

INTERRUPT, ERROR = "__interrupt__", "__error__"
QUESTION_CHARS = 2000  # an interrupt's value, as text, as the gate's question
INTERNAL = ("__", "branch:")  # LangGraph's own channels: not the graph's state
# state.json is a view of the thread's log (docs/decisions.md, "LangGraph runs"): replaced
# at most this often while checkpoints come fast, and always as the run ends.
STATE_EVERY = 0.25


# The exception that ended the process, if one did (sys.excepthook, chained): a graph
# interrupted by Ctrl-C or stop --now ends its run cancelled, one that raised failed.
_UNCAUGHT: list[BaseException | None] = [None]
_HOOKED: list[bool] = [False]


def _hook_uncaught() -> None:
    if _HOOKED[0]:
        return
    _HOOKED[0] = True
    previous = sys.excepthook

    def hook(kind: type[BaseException], exc: BaseException, tb: Any) -> None:
        _UNCAUGHT[0] = exc
        previous(kind, exc, tb)

    sys.excepthook = hook


def stop_asked(run_dir: Path) -> dict[str, Any] | None:
    """A stop (or stop now) asked of the run, taken: ``stop_requested``'s fields."""
    for kind in (requests.STOP_NOW, requests.STOP):
        path = run_dir / REQUESTS / f"{kind}.json"
        try:
            raw = path.read_bytes()
        except OSError:
            continue
        with contextlib.suppress(OSError):
            path.unlink()
        try:
            data = orjson.loads(raw)
        except orjson.JSONDecodeError:
            data = {}
        by = data.get("by") if isinstance(data, dict) else None
        return {"by": by if isinstance(by, dict) else {}, "now": kind == requests.STOP_NOW}
    return None


class GraphStopped(RefusedError):
    """A stop was asked of the graph's run: the graph stops at this checkpoint."""


@dataclass
class _Open:
    run_id: str
    key: str
    log: EventLog
    key_lock: Any
    round: int
    state: bytes | None = None  # the channel values not yet in state.json
    state_written: float = 0.0  # when state.json was last replaced (monotonic)


class GraphRuns:
    """The runs this process holds, one per thread it checkpoints."""

    def __init__(
        self,
        layout: Layout,
        pending: Callable[[str], set[str]],
        questions: Callable[[str], list[Any]] = lambda _: [],
    ) -> None:
        """``pending(key)``: the channels written since the thread's last root checkpoint;
        ``questions(key)``: the values its pending ``interrupt()``s ask."""
        self.layout = layout
        self.pending = pending
        self.questions = questions
        self._open: dict[str, _Open] = {}
        # A stop taken and not yet seen by the graph: raised from the thread's next put
        # and from the saver's next get_next_version (the graph's own thread calls it
        # while it applies a super-step's writes; a put may run in the background).
        self._stopping: dict[str, GraphStopped] = {}
        self.stop_due: GraphStopped | None = None
        self._mutex = threading.Lock()
        atexit.register(self.close)

    def checkpoint(
        self,
        key: str,
        ns: str,
        checkpoint: Any,
        metadata: Any,
        values: dict[str, Any],
    ) -> None:
        """A checkpoint was put: a round boundary of the thread's run (root only)."""
        if ns:
            return  # a subgraph's checkpoint: kept in the thread's log, not a round
        step = metadata.get("step") if isinstance(metadata, dict) else None
        with self._mutex:
            if key in self._stopping:
                raise self._stopping.pop(key)
            run = self._open.get(key) or self._take(key, step)
            if run is None:
                return
            if isinstance(step, int) and step >= 0:
                number = step + 1
                run.log.append("round_started", key=key, round=number, index=None)
                run.log.append(
                    "round_ended",
                    key=key,
                    round=number,
                    outcome="ok",
                    super_step=step,
                    checkpoint=checkpoint["id"],
                )
                run.round = number
            shown = {k: v for k, v in values.items() if not k.startswith(INTERNAL)}
            run.state, _, _ = encode_states({key: shown})
            if time.monotonic() - run.state_written >= STATE_EVERY:
                self._write_state(run)
            asked = stop_asked(self.layout.runs / run.run_id)
            if asked is not None:
                self._end(key, run, Status.CANCELLED, stopped=asked)
                stop = GraphStopped(f"run {run.run_id} of {key} was asked to stop")
                self._stopping[key] = self.stop_due = stop
                raise stop

    def close(self) -> None:
        """Let every run go: each ends as its graph's last checkpoint says."""
        with self._mutex:
            for key, run in list(self._open.items()):
                try:
                    written = self.pending(key)
                except (OSError, FlowdropError):
                    written = set()
                asked = stop_asked(self.layout.runs / run.run_id)
                if asked is not None or isinstance(_UNCAUGHT[0], KeyboardInterrupt):
                    self._end(key, run, Status.CANCELLED, stopped=asked)
                    continue
                if _UNCAUGHT[0] is not None:
                    status = Status.FAILED
                elif INTERRUPT in written:
                    status = Status.PAUSED
                    self._ask(key, run)
                elif ERROR in written:
                    status = Status.FAILED
                else:
                    status = Status.COMPLETED
                self._end(key, run, status)

    # opening and ending ---------------------------------------------------------------

    def _take(self, key: str, step: Any) -> _Open | None:
        entry = index.lookup(self.layout, key) or {}
        last = entry.get("last_run")
        if entry.get("status") == str(Status.PAUSED) and isinstance(last, str):
            resumed = self._resume(key, last, int(entry.get("round") or 0))
            if resumed is not None:
                return resumed
        run_id = new_run_id()
        try:
            key_lock = take_key(self.layout, key, run_id)
        except AlreadyRunningError:
            return None  # another process holds the key: its run shows the thread
        source = last if isinstance(last, str) and (self.layout.runs / last).is_dir() else None
        first = int(entry.get("round") or 0) + 1 if source else 1
        if isinstance(step, int):
            first = max(first, step + 1)
        created = {
            "v": RECORD_VERSION,
            "run": run_id,
            "key": key,
            "flow": index.GRAPH_FLOW,
            "start": "thread" if source else "fresh",
            "source": source,
            "source_status": entry.get("status") if source else None,
            "snapshot": None,
            "first_round": first,
            "chain_usage": chain_usage_field(self.layout, key, source),
            "resumable": True,
            "pid": os.getpid(),
            "pgid": os.getpgrp(),
            "host": socket.gethostname(),
            "git": git.facts(self.layout.workspace),
        }
        try:
            log = create_record(self.layout, run_id, key, created, {})
        except BaseException:
            locks.release(key_lock)
            raise
        log.append("started", **own_facts(), limit_wait=None)
        run = _Open(run_id, key, log, key_lock, first - 1)
        self._open[key] = run
        return run

    def _resume(self, key: str, run_id: str, round_: int) -> _Open | None:
        run_dir = self.layout.runs / run_id
        try:
            locks.acquire(run_dir / LIVE_LOCK, content=str(os.getpid()))
        except (locks.LockHeld, OSError):
            return None
        try:
            key_lock = take_key(self.layout, key, run_id)
        except FlowdropError:
            locks.release(run_dir / LIVE_LOCK)
            return None
        log = EventLog(run_dir / CYCLE)
        by = {**who(), "via": "langgraph"}  # the process that invoked the graph again
        log.append("resumed", **own_facts(), by=by, limit_wait=None)
        run = _Open(run_id, key, log, key_lock, round_)
        self._open[key] = run
        with contextlib.suppress(OSError):
            index.record_status(self.layout, self._folded(run_id), [key])
        return run

    def _ask(self, key: str, run: _Open) -> None:
        """The graph waits on ``interrupt()``: its question is the run's open gate (SPEC
        §21), in the inbox with how to answer it (``Command(resume=…)``); the next
        process that invokes the thread resumes the run and closes it."""
        try:
            asked = self.questions(key)
        except (OSError, FlowdropError):
            asked = []
        said = [value if isinstance(value, str) else _as_text(value) for value in asked]
        question = " · ".join(said) or "interrupt()"
        with contextlib.suppress(OSError):
            run.log.append(
                "gate_opened",
                gate="g" + secrets.token_hex(4),
                question=question[:QUESTION_CHARS],
                choices=None,
                key=key,
                round=run.round,
            )

    def _write_state(self, run: _Open) -> None:
        if run.state is None:
            return
        with contextlib.suppress(OSError):  # a view: the thread's log holds the checkpoint
            write_atomic(self.layout.runs / run.run_id / STATE, run.state, durable=False)
        run.state, run.state_written = None, time.monotonic()

    def _end(
        self, key: str, run: _Open, status: Status, *, stopped: dict[str, Any] | None = None
    ) -> None:
        del self._open[key]
        self._write_state(run)
        run_dir = self.layout.runs / run.run_id
        facts = git.facts(self.layout.workspace)
        with contextlib.suppress(OSError):
            if stopped is not None:
                run.log.append("stop_requested", **stopped)
            if status == Status.PAUSED:
                run.log.commit("paused", position=None, round=run.round, git=facts)
            else:
                run.log.commit(
                    "ended",
                    outcome=str(status),
                    result=None,
                    error=None,
                    git=facts,
                    position=None,
                    round=run.round,
                )
        with contextlib.suppress(OSError):
            index.record_status(self.layout, self._folded(run.run_id), [key])
        run.log.close()
        locks.release(run.key_lock)
        locks.release(run_dir / LIVE_LOCK)

    def _folded(self, run_id: str) -> Any:
        run_dir = self.layout.runs / run_id
        return fold_run(self.layout, run_id, run_dir)  # a big record: from its cached fold


def _as_text(value: Any) -> str:
    try:
        return orjson.dumps(value, default=str).decode()
    except (TypeError, orjson.JSONEncodeError):
        return repr(value)
