"""Folding a run's events into its ``RunInfo``, and loading runs from the workspace.

A record is always read a chunk at a time (``event_lines.line_batches``), and a big
one only from where its cached fold ends (``folded``): however long a run went on,
reading it never holds its record in memory (docs/reliability.md, "Giant records").
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from flowdrop_tui.core.errors import NotFoundError
from flowdrop_tui.core.files.regular import open_regular
from flowdrop_tui.core.paths import CYCLE, RUN_ID_RE, Layout
from flowdrop_tui.core.records.flow_state import state_log
from flowdrop_tui.core.records.log.event_lines import MAX_LINE, line_batches, parse_lines
from flowdrop_tui.core.records.log.event_log import side_value
from flowdrop_tui.core.records.run_record import folded
from flowdrop_tui.core.records.run_record.liveness import live_pid
from flowdrop_tui.core.records.run_record.run_info import LIVE, RunInfo, Status, clean_position
from flowdrop_tui.core.records.spend.budget import Used, between, clean_limits, session_tokens
from flowdrop_tui.core.records.spend.progress import Streaks, paused_by
from flowdrop_tui.core.records.spend.usage import Usage

# Events after which a run pauses by itself, waiting on a person (SPEC §14, §19, §20, §21):
# the inbox says which one paused it.
PAUSE_CAUSES = frozenset(
    {"budget_reached", "limit_reached", "gate_opened", "stalled", "same_failure"}
)


class RunFold:
    """``fold`` that can be fed more events later: a live run's new lines are folded
    onto what was read before, so following a week-long run never re-reads its record."""

    def __init__(self, run_id: str, path: Path) -> None:
        self.info = RunInfo(run=run_id, path=path)
        self.in_round_main = False

    def feed(self, events: list[dict[str, Any]]) -> RunInfo:
        """Fold ``events`` (the next lines of the record, in order); returns the run so far."""
        info = self.info
        info.events += len(events)
        for ev in events:
            self._apply(info, ev)
            if isinstance(ev.get("t"), str):
                info.last_event = ev["t"]
        if info.key is not None and info.key not in info.key_rounds:
            info.key_rounds[info.key] = info.first_round - 1
        info.status = info.recorded
        return info

    def _apply(self, info: RunInfo, ev: dict[str, Any]) -> None:
        name = ev["event"]
        if name in PAUSE_CAUSES:
            info.pause_cause = dict(ev)
        if name == "created":
            info.has_created = True
            info.key = ev.get("key") if isinstance(ev.get("key"), str) else None
            info.flow = ev.get("flow") if isinstance(ev.get("flow"), str) else None
            info.start = ev.get("start")
            info.source = ev.get("source")
            info.snapshot = ev.get("snapshot")
            first = ev.get("first_round")
            info.first_round = first if isinstance(first, int) and first >= 1 else 1
            info.started = ev.get("t")
            info.pid = ev.get("pid")
            info.resumable = ev.get("resumable")
            info.git_start = ev.get("git")
            info.position = clean_position(ev.get("position"))
            carried = ev.get("carried")
            info.carried = carried if isinstance(carried, dict) else {}
            if isinstance(info.key, str):
                info.chain_before[info.key] = Usage.from_json(ev.get("chain_usage"))
            info.recorded = Status.PENDING
            self._budget(info, ev)
            info.budget_carried = Used.from_record((ev.get("budget") or {}).get("carried"))
            info.git_last = info.git_start
            info.streaks = Streaks.from_record(ev.get("progress"))  # carried by a pick-up
        elif name in ("started", "resumed"):
            info.recorded = Status.RUNNING
            info.pid = ev.get("pid", info.pid)
            info.stretch += 1
            info.pause_cause = None
            info.holders.append({k: ev.get(k) for k in ("pid", "pgid", "sid", "start")})
            for gate in info.gates.values():
                if gate.get("status") == "open":  # resumed without its answer: asked again
                    gate["status"] = "closed"
            if info.running_since is not None:  # a stretch a kill cut short
                info.run_seconds += between(info.running_since, info.last_event)
            self._wait_over(info, info.last_event)
            info.running_since = ev.get("t") if isinstance(ev.get("t"), str) else None
            if name == "resumed":
                self._budget(info, ev)
                info.budget_reached = None
                info.limit_reached = None
                info.streaks.reset()  # SPEC §20: a person's resume begins the streaks again
                info.pause_reason = None
                if isinstance(ev.get("git"), dict):
                    info.git_last = ev["git"]
            # A process taking the run starts with no request pending: one recorded
            # before (a `stop` of the paused run killed before it could close it) was
            # never acted on, and this later resume is what was asked last.
            info.pause_pending = info.stop_pending = info.stop_now = False
        elif name == "round_started":
            key, number = ev.get("key"), ev.get("round")
            if isinstance(number, int) and isinstance(key, str):
                info.key_rounds[key] = max(number, info.key_rounds.get(key, 0))
                if key == info.key:
                    if not ev.get("again"):  # SPEC §21: a re-run of its round is no new one
                        info.rounds += 1
                    info.last_round = max(number, info.last_round or 0)
                    self.in_round_main = True
                    info.position["currentNodeId"] = key
                    if isinstance(ev.get("index"), int):
                        info.position["iterator"] = ev["index"]
                else:
                    info.position["currentNodeId"] = key
        elif name == "round_ended":
            key = ev.get("key")
            if key == info.key:
                self.in_round_main = False
                if isinstance(ev.get("round"), int):
                    info.streaks.round_ended(ev["round"], ev.get("moved"))
                if ev.get("outcome") == "ok":
                    info.gate_answers = []  # SPEC §21: the round that asked is done
                    info.rerun_round = None
                    info.position["iterationCount"] += 1
                    if isinstance(ev.get("index"), int):
                        info.position["iterator"] = ev["index"] + 1
                info.position["currentNodeId"] = ""
            else:
                info.position["currentNodeId"] = info.key if self.in_round_main else ""
        elif name == "call_started":
            key = ev.get("key")
            if isinstance(key, str):
                if key not in info.called:
                    info.called.append(key)
                if key not in info.chain_before:
                    info.chain_before[key] = Usage.from_json(ev.get("chain_usage"))
                info.position["currentNodeId"] = key
                first = ev.get("first_round")
                if isinstance(first, int) and key not in info.key_rounds:
                    info.key_rounds[key] = first - 1
        elif name == "call_ended":
            info.position["currentNodeId"] = (info.key or "") if self.in_round_main else ""
        elif name == "warning":
            info.warnings.append(str(ev.get("message", "")))
        elif name == "stop_requested":
            info.stop_pending = True
            info.stop_now = info.stop_now or bool(ev.get("now"))
        elif name == "pause_requested":
            info.pause_pending = True
            info.pause_reason = {"kind": "request", "by": ev.get("by")}
        elif name in ("stalled", "same_failure"):
            info.pause_reason = paused_by(name, ev)
        elif name == "paused":
            info.recorded = Status.PAUSED
            info.pause_pending = False
            info.position = clean_position(ev.get("position"))
            self._stretch_ended(info, ev)
        elif name == "limit_wait":
            if info.waiting is None:
                info.waiting = {"since": ev.get("t")}
            info.waiting.update(
                {k: ev.get(k) for k in ("backend", "until", "next_probe", "source", "key")}
            )
            info.waiting["inside"] = ev.get("inside") is True  # the CLI waits in its session
        elif name == "limit_wait_ended":
            self._wait_over(info, ev.get("t"))
        elif name == "limit_reached":
            info.limit_reached = {
                k: ev.get(k) for k in ("backend", "until", "next_probe", "source", "limit_wait")
            }
            info.pause_reason = {"kind": "limit", **info.limit_reached}
        elif name == "budget_reached":
            info.budget_reached = {k: ev.get(k) for k in ("budget", "limit", "used")}
            info.pause_reason = {"kind": "budget", **info.budget_reached}
        elif name == "gate_opened" and isinstance(ev.get("gate"), str):
            # SPEC §21: the question is the pause: a kill before `paused` leaves it paused
            info.gates[ev["gate"]] = {
                "gate": ev["gate"],
                **{k: ev.get(k) for k in ("question", "choices", "key", "round")},
                **{k: ev[k] for k in ("ask", "in_round") if k in ev},
                "opened": ev.get("t"),
                "status": "open",
            }
            if isinstance(ev.get("in_round"), int):  # asked inside a round: it runs again
                info.rerun_round = ev["in_round"]
            info.recorded = Status.PAUSED
            info.pause_pending = False
            if "position" in ev:
                info.position = clean_position(ev.get("position"))
            self._stretch_ended(info, ev)
            info.pause_reason = {"kind": "gate", **info.gates[ev["gate"]]}
        elif name == "gate_answered":
            answered = info.gates.get(str(ev.get("gate")))
            if answered is not None:
                answered.update(status="answered", answer=ev.get("answer"), by=ev.get("by"))
            info.gate_answers.append(answer_of(answered or {"gate": ev.get("gate")}, ev))
        elif name == "gate_closed":  # SPEC §21: its round ended and no ask took its answer
            info.gate_answers = [a for a in info.gate_answers if a.get("gate") != ev.get("gate")]
        elif name == "ended":
            for gate in info.gates.values():
                if gate.get("status") == "open":
                    gate["status"] = "closed"
            outcome = ev.get("outcome")
            info.recorded = (
                Status(outcome)
                if outcome in ("completed", "failed", "cancelled")
                else Status.FAILED
            )
            if info.recorded == Status.COMPLETED:
                info.streaks.reset()  # SPEC §20: a run that completed ends the streaks
            info.ended = ev.get("t")
            info.result = ev.get("result")
            info.error = side_value(info.path, ev.get("error"))  # small, and shown as is
            info.git_end = ev.get("git")
            if "position" in ev:
                info.position = clean_position(ev.get("position"))
            info.pause_pending = info.stop_pending = False
            self._stretch_ended(info, ev)
        elif name == "session_opened":
            info.sessions.append(dict(ev))
        elif name == "session_closed":
            info.tokens += session_tokens(ev.get("usage"))
            for session in reversed(info.sessions):
                if session.get("session") == ev.get("session"):
                    session["closed"] = dict(ev)
                    break

    @staticmethod
    def _budget(info: RunInfo, ev: dict[str, Any]) -> None:
        budget = ev.get("budget")
        if isinstance(budget, dict):
            info.budget_limits = clean_limits(budget.get("limits"))
            info.budget_overrides = clean_limits(budget.get("overrides"))
        digest = ev.get("flow_digest")
        if isinstance(digest, str):
            info.flow_digest = digest

    @staticmethod
    def _wait_over(info: RunInfo, end: Any) -> None:
        if info.waiting is not None:
            info.waited_seconds += between(info.waiting.get("since"), end)
            info.waiting = None

    @classmethod
    def _stretch_ended(cls, info: RunInfo, ev: dict[str, Any]) -> None:
        cls._wait_over(info, ev.get("t"))
        if info.running_since is not None:
            info.run_seconds += between(info.running_since, ev.get("t"))
            info.running_since = None
        if isinstance(ev.get("git"), dict):
            info.git_last = ev["git"]
        refused = ev.get("state_refused")  # the run's count so far (a resume carries it on)
        if isinstance(refused, dict):
            info.state_refused = {
                str(k): v for k, v in refused.items() if isinstance(v, int) and v > 0
            }


def answer_of(gate: dict[str, Any], answered: dict[str, Any]) -> dict[str, Any]:
    """SPEC §21: an answer with what ties it to the ``ask`` that gets it back — the gate's
    question, its key, its place among the asks of its round and that round."""
    tie = {k: gate.get(k) for k in ("question", "key")}
    tie.update({k: gate[k] for k in ("ask", "in_round") if k in gate})  # a gate of before
    return {**tie, "gate": gate.get("gate"), "answer": answered.get("answer")}


def fold(run_id: str, path: Path, events: list[dict[str, Any]]) -> RunInfo:
    """The run as its events describe it (its *recorded* status; see ``load_run``)."""
    return RunFold(run_id, path).feed(events)


def derive_status(info: RunInfo) -> RunInfo:
    """Turn a recorded live status into ``interrupted`` when no process holds the run."""
    if info.recorded in LIVE:
        info.live_pid = live_pid(info.path)
        info.status = info.recorded if info.live_pid is not None else Status.INTERRUPTED
        if info.live_pid is None:  # a kill or a power cut: its state.json made whole now
            state_log.settle(info.path)
    else:
        info.status = info.recorded
    return info


def load_run(layout: Layout, run_id: str) -> RunInfo:
    """A run's record, folded, with its status checked against liveness."""
    path = layout.run_dir(run_id)
    if not path.is_dir():
        raise NotFoundError(f"no run {run_id} in {layout.runs}")
    return derive_status(fold_run(layout, run_id, path))


def fold_run(layout: Layout, run_id: str, path: Path) -> RunInfo:
    """The run's *recorded* fold (``fold`` of its whole record), read a chunk at a time;
    for a big record, from its cached fold and only the lines after it."""
    kept = KeptFold(layout, run_id, path)
    kept.update()
    return kept.with_last_line()


class KeptFold:
    """A record folded as it grows, new lines only, its fold kept in the cache
    (``folded``) once the record is big and again every ``CACHE_MIN`` it grows.

    ``fold_run`` uses one for a single read; the process holding a run keeps one for its
    whole life (``BudgetMeter``), so that the cache of a week-long run is always warm: its
    end, ``flows``, ``runs``, ``show`` and the next pick-up read only its last lines."""

    def __init__(self, layout: Layout, run_id: str, path: Path) -> None:
        self.layout = layout
        self.run_id = run_id
        self.path = path
        self.run = RunFold(run_id, path)
        self.offset = 0  # the record is folded up to here (whole lines only)
        self._identity: list[int] | None = None
        self._kept = 0  # the offset the cache holds (0: none yet)

    def update(self) -> RunInfo:
        """The fold with the whole lines appended since the last update."""
        try:
            fd = open_regular(self.path / CYCLE)  # never a FIFO or a device
        except OSError:
            return self.run.feed([])
        try:
            stat = os.fstat(fd)
            identity = [stat.st_dev, stat.st_ino]
            if identity != self._identity or stat.st_size < self.offset:
                self._start(identity, stat.st_size)  # first read, or a record replaced
            for lines, after in line_batches(fd, self.offset, stat.st_size):
                self.run.feed(parse_lines(lines))
                self.offset = after
        except OSError:
            return self.run.feed([])
        finally:
            os.close(fd)
        if stat.st_size >= folded.CACHE_MIN and (
            self._kept == 0 or self.offset - self._kept >= folded.CACHE_MIN
        ):
            raw = folded.encode(self.run.info, self.run.in_round_main, identity, self.offset)
            folded.save(self.layout, self.run_id, raw)
            self._kept = self.offset
        return self.run.feed([])

    def _start(self, identity: list[int], size: int) -> None:
        self.run = RunFold(self.run_id, self.path)
        self._identity, self.offset, self._kept = identity, 0, 0
        if size >= folded.CACHE_MIN:
            restored = folded.restore(self.layout, self.run_id, self.path, identity, size)
            if restored is not None:
                self.run.info, self.run.in_round_main = restored.info, restored.in_round_main
                self.offset = self._kept = restored.offset

    def with_last_line(self) -> RunInfo:
        """The fold with the record's last line too when it parses without its newline
        (as ``event_lines.read_events`` reads it); only for a fold read once: that line
        is folded here and would be folded again by the next ``update``."""
        try:
            fd = open_regular(self.path / CYCLE)
        except OSError:
            return self.run.feed([])
        try:
            stat = os.fstat(fd)
            if [stat.st_dev, stat.st_ino] == self._identity and stat.st_size > self.offset:
                tail = os.pread(fd, min(stat.st_size - self.offset, MAX_LINE), self.offset)
                if b"\n" not in tail:
                    self.run.feed(parse_lines(tail))
        except OSError:
            pass
        finally:
            os.close(fd)
        return self.run.feed([])


def list_run_ids(layout: Layout) -> list[str]:
    """Every run id in the workspace, oldest first (ids sort by start). A plain file
    named as a run (a power cut's stray, ``trash.strays``) is never a run."""
    try:
        entries = list(os.scandir(layout.runs))
    except OSError:
        return []
    return sorted(
        entry.name
        for entry in entries
        if RUN_ID_RE.match(entry.name) and not entry.is_file(follow_symlinks=False)
    )
