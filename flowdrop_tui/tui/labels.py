"""How records read on screen: plain functions from record data to short text.

Times are shown in UTC, as the records hold them, so what the screen says can
be matched against ``cycle.jsonl`` and the CLI without converting.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from flowdrop_tui.format import (
    budget_reached_words,
    error_words,
    limit_reached_words,
    paused_by_words,
    rounds_range,
    start_words,
    waiting_words,
)

if TYPE_CHECKING:  # the records' classes load after the first frame (bench/README.md, (a))
    from flowdrop_tui.core.records.run_record.run_info import RunInfo

_WHERE = re.compile(r"^(?P<file>[^:\n]+):(?P<line>\d+): (?P<message>.*)$", re.DOTALL)


def short_error(error: str) -> str:
    """A flow's load error in a table cell: ``SyntaxError, line 3``."""
    text = error.strip().splitlines()[0] if error.strip() else "cannot be loaded"
    if "did not answer" in text:
        return "no answer in 5 s"
    match = _WHERE.match(text)
    if match:
        kind = match["message"].split(":", 1)[0]
        return f"{kind}, line {match['line']}"
    if "no @flow function" in text:
        return "no @flow function"
    if "more than one @flow" in text:
        return "two @flow functions"
    return text.rsplit(": ", 1)[-1][:40]


def stamp(value: Any) -> str:
    """``2026-08-17 01:44:55`` from an ISO time; empty when there is none."""
    return str(value)[:19].replace("T", " ") if isinstance(value, str) else ""


def clock(value: Any) -> str:
    """``01:44:55.212`` from an ISO time: an event's time of day."""
    return str(value)[11:23] if isinstance(value, str) and len(value) >= 23 else "??:??:??.???"


def rounds_label(info: RunInfo) -> str:
    return rounds_range(info.first_round, info.last_round)


def _by(value: Any) -> str:
    if not isinstance(value, dict):
        return ""
    via = value.get("via") or value.get("signal") or value.get("user") or "?"
    pid = value.get("pid")
    return f"by {via}" + (f" (pid {pid})" if pid else "")


def _fields(fields: Any) -> str:
    if not isinstance(fields, dict):
        return ""
    return " ".join(f"{k}={v!r}" if isinstance(v, str) else f"{k}={v}" for k, v in fields.items())


def event_detail(ev: dict[str, Any]) -> str:
    """What an event says, in a few words."""
    name = ev.get("event")
    if name == "created":
        how = start_words(ev.get("start"), ev.get("source"), ev.get("snapshot"))
        return f"{ev.get('key')} · {how} · first round {ev.get('first_round')}"
    if name in ("started", "resumed"):
        by = _by(ev.get("by"))
        return f"pid {ev.get('pid')}" + (f" · {by}" if by else "")
    if name == "round_started":
        index = ev.get("index")
        return (
            f"{ev.get('key')} round {ev.get('round')}"
            + (f" · item {index}" if index is not None else "")
            + (" · again" if ev.get("again") else "")  # SPEC §21: a question's round re-run
        )
    if name == "round_ended":
        seconds = ev.get("seconds")
        took = f" · {seconds:.1f}s" if isinstance(seconds, int | float) else ""
        moved = ev.get("moved")
        changed = moved.get("changed") if isinstance(moved, dict) else None
        what = ""
        if isinstance(changed, list):
            what = " · changed " + ", ".join(map(str, changed)) if changed else " · no change"
        return f"{ev.get('key')} round {ev.get('round')} · {ev.get('outcome')}{took}{what}"
    if name in ("stalled", "same_failure"):
        return paused_by_words({"kind": name, **ev}) or name
    if name == "log":
        extra = _fields(ev.get("fields"))
        return f"{ev.get('message')}" + (f" · {extra}" if extra else "")
    if name == "session_opened":
        target = ev.get("target")  # Codex names its transcript later: null here
        where = f" → {target}" if target else ""
        return f"{ev.get('backend')} session {ev.get('session')}{where}"
    if name == "gate_opened":
        choices = ev.get("choices")
        listed = f" [{' / '.join(map(str, choices))}]" if isinstance(choices, list) else ""
        asked = f"asks {ev.get('question')!r}{listed}"
        return asked + (f" · round {ev['round']}" if ev.get("round") is not None else "")
    if name == "gate_answered":
        by = _by(ev.get("by"))
        return f"answered {ev.get('answer')!r}" + (f" · {by}" if by else "")
    if name == "notice_sent":
        return f"notice sent: {str(ev.get('kind') or '?').replace('_', ' ')}"
    if name == "budget_reached":
        return budget_reached_words(ev)
    if name == "session_closed":
        return f"session {ev.get('session')} · exit {ev.get('exit_code')}"
    if name == "call_started":
        return f"calls {ev.get('key')} (first round {ev.get('first_round')})"
    if name == "call_ended":
        return f"{ev.get('key')} {ev.get('outcome')}"
    if name == "stop_requested":
        return ("now · " if ev.get("now") else "after the round · ") + _by(ev.get("by"))
    if name == "pause_requested":
        return _by(ev.get("by"))
    if name == "paused":
        return f"after round {ev.get('round')}"
    if name == "ended":
        error = ev.get("error")
        if isinstance(error, dict):
            return f"{ev.get('outcome')} · {error_words(error, place=False)}"
        result = ev.get("result")
        return f"{ev.get('outcome')}" + (f" · {result!r}" if result is not None else "")
    if name == "warning":
        return str(ev.get("message", ""))
    if name == "limit_wait":
        wait = {
            "backend": ev.get("backend"),
            "until": ev.get("until"),
            "next_probe": ev.get("next_probe"),
            "inside": ev.get("inside"),
        }
        return f"{waiting_words(wait)} · {ev.get('source')}"
    if name == "limit_wait_ended":
        return f"{ev.get('backend')} · {ev.get('outcome')} after {ev.get('seconds')}s"
    if name == "limit_reached":
        return limit_reached_words(ev)
    if name == "killing":
        return f"{ev.get('signal')} · {ev.get('reason')}"
    rest = {k: v for k, v in ev.items() if k not in ("t", "event")}
    return _fields(rest)


def event_line(ev: dict[str, Any]) -> str:
    """One event as one line of the event feed."""
    return f"{clock(ev.get('t'))}  {ev.get('event')!s:<15} {event_detail(ev)}"


def ended_text(info: RunInfo) -> tuple[str, str]:
    """A notification for a run that ended or paused while watched: (text, severity)."""
    from flowdrop_tui.core.records.run_record.run_info import (
        Status,  # a run's end: after the first frame
    )

    head = f"run {info.run} of {info.key}"
    if info.status == Status.COMPLETED:
        result = f": {info.result!r}" if info.result is not None else ""
        return f"{head} completed after round {info.round}{result}", "information"
    if info.status == Status.FAILED:
        return f"{head} failed: {error_words(info.error or {})}", "error"
    if info.status == Status.CANCELLED:
        return f"{head} stopped after round {info.round}; enter picks it up", "information"
    if info.status == Status.PAUSED and info.budget_reached:
        reached = info.budget_reached
        return (
            f"{head} paused before round {info.round + 1}: {budget_reached_words(reached)}; "
            f"r raises it here, or: flowdrop-tui resume {info.run} --max-{reached.get('budget')} N"
        ), "warning"
    why = paused_by_words(info.paused_by) if info.status == Status.PAUSED else None
    if why is not None:
        waits = " (it waits again while the limit lasts)" if info.limit_reached else ""
        return f"{head} paused after round {info.round}: {why}; r resumes it{waits}", "warning"
    if info.status == Status.PAUSED:
        return f"{head} paused after round {info.round}; r resumes it", "information"
    return f"{head} was interrupted in round {info.round}: its process died", "warning"


def lane_words(facts: dict[str, Any] | None) -> str:
    """A lane's git facts in a few words, what matters first (they fit ABOUT at 80
    columns): ``dirty · +2/-0`` (its tree; commits ahead of / behind its base branch,
    as ``lanes`` writes them), ``landed in main d7c1c06``."""
    if not facts:
        return ""
    landed = facts.get("landed")
    if isinstance(landed, dict):
        commit = str(landed.get("commit") or "")[:7]
        return f"landed in {landed.get('into')} {commit}"
    if facts.get("dropped"):
        return "dropped"
    if facts.get("exists") is False:
        return "no worktree"
    words = []
    dirty = facts.get("dirty")
    if facts.get("note"):
        words.append("broken")  # git cannot read its worktree (`lanes` says how to mend it)
    elif dirty is not None:
        words.append("dirty" if dirty else "clean")  # its worktree: uncommitted changes
    words.append(f"+{facts.get('ahead') or 0}/-{facts.get('behind') or 0}")
    return " · ".join(words)
