"""How the faces word the core's data: the CLI's tables and the phrases the UI shares.

The core answers in data; each fact is worded here once (a rounds range, a run's
error, how a run started, what a stop or pause did), for the CLI and the UI alike.
``--json`` gives the same data unworded.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

import orjson

if TYPE_CHECKING:
    from flowdrop_tui.core.control.verbs import Asked


def duration(seconds: float | None) -> str:
    """``1h02m``, ``3m05s``, ``12s``; empty when unknown (``RunInfo.seconds``: a run's
    running time, fixed once it has stopped)."""
    if seconds is None:
        return ""
    seconds = max(0, int(seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes:02d}m"
    if minutes:
        return f"{minutes}m{secs:02d}s"
    return f"{secs}s"


def run_times(running: float | None, wall: float | None) -> str:
    """``running 24s · wall 32s``: the time it ran (what the minutes budget counts: no
    paused stretch, no usage-limit wait) and the wall-clock time from its start to its
    end (or now), paused time included; either left out when unknown."""
    parts = [f"running {duration(running)}"] if running is not None else []
    if wall is not None:
        parts.append(f"wall {duration(wall)}")
    return " · ".join(parts)


def rounds_range(first: Any, last: Any, empty: str = "—") -> str:
    """``26–34``; ``7`` for a run of one round; ``empty`` before any round."""
    if not last:
        return empty
    return str(first) if first == last else f"{first}–{last}"


def error_words(error: Any, *, place: bool = True) -> str:
    """A run's recorded error: ``KeyError: 'x' at flows/a/flow.py:4``."""
    if not isinstance(error, dict):
        return str(error)
    words = f"{error.get('type')}: {error.get('message')}"
    if place and error.get("line"):
        words += f" at {error.get('file')}:{error.get('line')}"
    return words


def start_words(start: Any, source: Any, snapshot: Any = None) -> str:
    """How a run's starting state was chosen: ``picked up from RUN``, ``fresh``, …"""
    if start in ("thread", "from"):
        return f"picked up from {source}"
    if start == "snapshot":
        return f"started from snapshot {snapshot or source}"
    return "fresh"


def asked_text(asked: Asked) -> str:
    """What a stop or pause request did, in a sentence."""
    from flowdrop_tui.core.control.verbs import Action  # with the answer: not at start

    if asked.action == Action.CLOSED:
        return f"run {asked.run} was paused; it is now closed cancelled"
    if asked.action == Action.STOP_NOW:
        return f"run {asked.run} is stopping now (its round in flight is interrupted)"
    if asked.action == Action.PAUSE_AFTER_ROUND:
        return f"run {asked.run} will pause after round {asked.round}"
    return (
        f"run {asked.run} will stop after round {asked.round} "
        "(stop again, or stop --now, to stop it at once)"
    )


def round_label(number: int) -> str:
    return f"round {number}" if number else "no rounds yet"


def status_label(status: Any) -> str:
    if status is None:
        return "never run"
    return "not started" if status == "pending" else str(status)


def _table(headers: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=False)).rstrip()]
    for row in rows:
        lines.append("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=False)).rstrip())
    return "\n".join(lines)


def tokens(count: int) -> str:
    """A token count as a person reads it: 950, 12.3k, 4.1M."""
    if count < 1000:
        return str(count)
    if count < 1_000_000:
        return f"{count / 1000:.1f}k"
    return f"{count / 1_000_000:.1f}M"


def usage_text(usage: Any) -> str:
    """``12.3k in (10.0k cache read, 300 cache write), 450 out`` — or ``—`` for none."""
    if not isinstance(usage, dict):
        return "—"
    parts = []
    for name, label in (("cache_read", "cache read"), ("cache_write", "cache write")):
        if usage.get(name):
            parts.append(f"{tokens(int(usage[name]))} {label}")
    inside = f" ({', '.join(parts)})" if parts else ""
    return (
        f"{tokens(int(usage.get('input') or 0))} in{inside}, "
        f"{tokens(int(usage.get('output') or 0))} out"
    )


def usage_short(usage: Any) -> str:
    """A flow list cell: tokens in and out, ``12.3k/450``; empty for none."""
    if not isinstance(usage, dict):
        return ""
    return f"{tokens(int(usage.get('input') or 0))}/{tokens(int(usage.get('output') or 0))}"


def flows_table(rows: list[dict[str, Any]]) -> str:
    """The flow list; a USAGE column (tokens in/out since the thread's chain began)
    only when some flow has usage to show."""
    metered = any(row.get("usage") for row in rows)
    table = []
    for row in rows:
        resumable = "error" if row.get("error") else "yes" if row.get("resumable") else "no"
        cells = [
            str(row["name"]),
            resumable,
            round_label(int(row.get("round") or 0)),
            status_label(row.get("status")),
            str(row.get("last_run") or "—"),
        ]
        if metered:
            cells.append(usage_short(row.get("usage")) or "—")
        about = str(row.get("error") or row.get("description") or "")
        if row.get("by_path"):  # SPEC §2: a path is a key of its own
            about = "its own thread: run by path" + (f" · {about}" if about else "")
        cells.append(about)
        table.append(cells)
    headers = ["FLOW", "RESUMABLE", "ROUND", "STATUS", "LAST RUN"]
    headers += ["USAGE"] if metered else []
    return _table([*headers, "ABOUT"], table)


def runs_table(rows: list[dict[str, Any]], workers: dict[str, str | None] | None = None) -> str:
    """The run list; a USAGE column (tokens in/out) only when some run has usage, a
    WORKER column (remote mode: the worker that runs or ran it) when some run has one."""
    metered = any(row.get("usage") for row in rows)
    workers = {run: name for run, name in (workers or {}).items() if name}
    table = []
    for row in rows:
        cells = [
            str(row["run"]),
            str(row.get("flow")),
            status_label(row.get("status"))
            + (", waiting" if row.get("waiting") else "")
            + (", pinned" if row.get("pinned") else ""),
            rounds_range(row.get("first_round"), row.get("last_round")),
            str(row.get("started") or "")[:19].replace("T", " "),
            duration(row.get("duration")),
            str(row.get("picked_up_from") or "—"),
        ]
        if workers:
            cells.append(workers.get(str(row["run"])) or "—")
        table.append([*cells, usage_short(row.get("usage")) or "—"] if metered else cells)
    headers = ["RUN", "FLOW", "STATUS", "ROUNDS", "STARTED", "DURATION", "PICKED UP FROM"]
    headers += ["WORKER"] if workers else []
    text = _table([*headers, "USAGE"] if metered else headers, table)
    why = [
        f"{row['run']} paused — {words}"
        for row in rows
        if (words := paused_by_words(row.get("paused_by"))) is not None
        and row.get("paused_by", {}).get("kind") != "budget"
    ]
    return "\n".join([text, "", *why]) if why else text


def no_runs_words(name: str, error: Any, called_by: Any = None, last_run: Any = None) -> str:
    """The run pane of a flow with no runs: how to run it — or, when it cannot load, why
    it cannot run (docs/decisions.md, "What a newcomer tripped on"). A flow that ran only
    when another called it (``run.call``) has no runs of its own, yet its key has a last
    run (its caller's, ``last_run``) and its row says `completed`: the pane says where it
    ran."""
    if error:
        return f"{name} cannot be loaded, so it cannot run: {error} — e opens its flow.py"
    if last_run:
        return (
            f"{name} has run only when {called_by or 'another flow'} called it "
            f"(last in run {last_run}) — enter runs it on its own"
        )
    return f"no runs of {name} yet — enter runs it"


def refused_words(where: str, count: Any) -> str:
    """SPEC §5.3: a state value that saves left out, warned of twice and then counted."""
    saves = "1 save" if count == 1 else f"{count} saves"
    return f"state value {where}: left out of {saves} in this run (its last saved value stands)"


def show_text(detail: dict[str, Any], worker: str | None = None) -> str:
    """``show``'s words; ``worker``: the worker that runs or ran it (remote mode)."""
    lines = [
        f"run             {detail['run']}",
        f"flow            {detail.get('flow')}  ({detail.get('flow_path')})",
        f"status          {status_label(detail.get('status'))}"
        + ("  (pinned: prune never deletes it)" if detail.get("pinned") else ""),
        "rounds          "
        + rounds_range(detail.get("first_round"), detail.get("last_round"), "none")
        + f" ({detail.get('rounds')} in this run)",
        f"start           {detail.get('start')}"
        + (f", picked up from {detail['picked_up_from']}" if detail.get("picked_up_from") else ""),
        f"started         {detail.get('started')}",
        f"ended           {_ended(detail)}",
    ]
    if worker:
        lines.append(f"worker          {worker}")
    lines.append(f"budget          {budget_words(detail.get('budget'))}")
    why = paused_by_words(detail.get("paused_by"))
    if why is not None:
        kind = (detail.get("paused_by") or {}).get("kind")
        goes_on = "" if kind == "budget" else f"; flowdrop-tui resume {detail['run']} goes on"
        lines.append(f"paused on       {why}{goes_on}")
    if detail.get("waiting"):
        lines.append(f"now             {waiting_words(detail['waiting'])}")
    if detail.get("error"):
        lines.append(f"error           {error_words(detail['error'], place=False)}")
    if detail.get("result") is not None:
        lines.append(f"result          {detail['result']!r}")
    for warning in detail.get("warnings") or []:
        lines.append(f"warning         {warning}")
    for where, count in (detail.get("state_refused") or {}).items():
        lines.append(f"not saved       {refused_words(where, count)}")
    if detail.get("usage") is not None:
        lines.append(f"usage           {usage_text(detail['usage'])}")
    lines.append("state")
    if detail.get("state") is None:
        lines.append(f"  unreadable: {detail.get('state_error')}")
    else:
        text = orjson.dumps(detail["state"], option=orjson.OPT_INDENT_2).decode()
        lines.extend("  " + line for line in text.splitlines())
    sessions = detail.get("sessions") or []
    lines.append(f"sessions        {len(sessions) or 'none'}")
    for session in sessions:
        health = "ok" if session.get("exists") else "missing"
        lines.append(f"  {session.get('link')} -> {session.get('target')} [{health}]")
        lines.append(f"    {_session_outcome(session, detail.get('status'))}")
        if session.get("usage") is not None:
            lines.append(f"    usage: {usage_text(session['usage'])}")
    git = detail.get("git")
    if git is None:
        lines.append("git             not a git repository")
    else:
        lines.append(f"git start       {_git_facts(git.get('start'))}")
        lines.append(f"git end         {_git_facts(git.get('end'))}")
        commits = git.get("commits") or []
        lines.append(f"commits         {len(commits) or 'none'}")
        for commit in commits:
            lines.append(f"  {str(commit.get('sha'))[:10]} {commit.get('summary')}")
    lines.extend(_output(detail))
    return "\n".join(lines)


def _output(detail: dict[str, Any]) -> list[str]:
    """The last lines the flow printed, tracebacks included (``output.log``)."""
    if detail.get("output_error"):
        return [f"output          unreadable: {detail['output_error']}"]
    tail = detail.get("output_tail") or []
    if not tail:
        return ["output          nothing printed"]
    if detail.get("output_more"):
        head = f"last {len(tail)} lines of output.log; all of it: flowdrop-tui logs {detail['run']}"
    else:
        head = "what the flow printed (output.log)"
    head = f"output          {head}"
    return [head, *("  " + line for line in tail)]


def _ended(detail: dict[str, Any]) -> str:
    """When it ended and how long it ran; a paused or killed run recorded no end."""
    took = duration(detail.get("duration"))
    if detail.get("ended"):
        return f"{detail['ended']}  (ran {took})"
    if detail.get("status") in ("running", "pending"):
        return f"—  (running for {took})"
    return f"—  (ran {took}, up to its last event)"


def _session_outcome(session: dict[str, Any], run_status: Any) -> str:
    where = f"{session.get('backend')}, round {session.get('round') or '—'}"
    if not session.get("closed"):
        live = run_status in ("running", "pending")
        return f"{where}: " + ("running" if live else "never closed (its run was killed)")
    what = f"exit {session.get('exit_code')}, {session.get('seconds')}s"
    if session.get("interrupted"):
        what += ", interrupted"
    if session.get("error"):
        what += f", error: {str(session['error']).splitlines()[0][:80]}"
    return f"{where}: {what}"


def _git_facts(facts: Any) -> str:
    if not isinstance(facts, dict):
        return "—"
    head = str(facts.get("head") or "no commits")[:10]
    branch = facts.get("branch") or "detached HEAD"
    return f"{head} on {branch}" + (", dirty" if facts.get("dirty") else "")


def _number(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def budget_words(budget: Any) -> str:
    """``rounds 3/5 · tokens 12000/50000`` (``used/limit`` of each limited budget); with no
    limit at all, ``no limit (rounds 3 used)``. Minutes used are shown only against a
    limit: they move every second a run runs."""
    if not isinstance(budget, dict):
        return "no limit"
    parts = []
    for kind in ("rounds", "minutes", "tokens"):
        item = budget.get(kind) or {}
        if item.get("limit") is not None:
            parts.append(f"{kind} {_number(item.get('used') or 0)}/{_number(item['limit'])}")
    if parts:
        return " · ".join(parts)
    used = [
        f"{kind} {_number((budget.get(kind) or {}).get('used'))}"
        for kind in ("rounds", "tokens")
        if (budget.get(kind) or {}).get("used")
    ]
    return f"no limit ({', '.join(used)} used)" if used else "no limit"


def budget_reached_words(reached: dict[str, Any]) -> str:
    """Why a run paused on a budget: ``rounds budget reached (5 of 5 used)``."""
    unit = " minutes" if reached.get("budget") == "minutes" else ""
    return (
        f"{reached.get('budget')} budget reached "
        f"({_number(reached.get('used'))}{unit} of {_number(reached.get('limit'))} used)"
    )


def lift_words(kinds: list[str]) -> str:
    """What lifting a budget with ``none`` means, said once before it is done (the UI's
    budget dialogs, ``run``/``resume --max-KIND none``): ``no limit on rounds: …``."""
    return f"no limit on {' or '.join(kinds)}: the loop runs until it stops itself or you stop it"


def _clock(stamp: Any) -> str | None:
    """``14:05`` (local time) from an ISO time; the date too when it is not today."""
    if not isinstance(stamp, str):
        return None
    try:
        when = datetime.fromisoformat(stamp.replace("Z", "+00:00")).astimezone()
    except ValueError:
        return None
    today = datetime.now().astimezone().date()
    return when.strftime("%H:%M" if when.date() == today else "%Y-%m-%d %H:%M")


def waiting_words(waiting: dict[str, Any] | None) -> str:
    """SPEC §19: ``waiting for claude's limit until 14:05`` (or its next try, when the
    CLI gave no reset time); empty when the run is not waiting."""
    if not waiting:
        return ""
    head = f"waiting for {waiting.get('backend')}'s limit"
    until = _clock(waiting.get("until"))
    if waiting.get("inside"):  # the CLI waits inside its own session, and retries itself
        return f"{head} until {until} (in its session)" if until else f"{head} (in its session)"
    if until is not None:
        return f"{head} until {until}"
    probe = _clock(waiting.get("next_probe"))
    return f"{head} (no reset time; next try {probe})" if probe else head


def limit_reached_words(reached: dict[str, Any]) -> str:
    """Why a run paused on a usage limit: ``codex's usage limit until 14:05 (waits at most
    12 h)``."""
    when = _clock(reached.get("until")) or _clock(reached.get("next_probe"))
    cap = reached.get("limit_wait")
    shown = duration(float(cap)) if isinstance(cap, int | float) else "?"
    return (
        f"{reached.get('backend')}'s usage limit"
        + (f" until {when}" if when else "")
        + f", longer than its limit wait ({shown})"
    )


def paused_by_words(paused_by: Any) -> str | None:
    """Why a run paused on its own (SPEC §14, §20): ``stalled: 5 rounds without a
    change``, ``same failure 5 rounds in a row: <error>``, a budget; ``None`` for a
    pause someone asked for, or none."""
    if not isinstance(paused_by, dict):
        return None
    kind = paused_by.get("kind")
    found = paused_by.get("rounds")
    rounds: list[Any] = found if isinstance(found, list) else []
    if kind == "stalled":
        return f"stalled: {len(rounds)} rounds without a change"
    if kind == "same_failure":
        error = " ".join(str(paused_by.get("error") or "").split())
        if len(error) > 160:
            error = error[:159] + "…"
        code = paused_by.get("exit_code")
        return f"same failure {len(rounds)} rounds in a row: {error or f'exit {code}'}"
    if kind == "budget":
        return budget_reached_words(paused_by)
    if kind == "limit":
        return limit_reached_words(paused_by)
    return None


def plan_what(answer: dict[str, Any]) -> str:
    """What ``run`` would do, in a line: ``pick up from RUN (cancelled), round 6``."""
    start, source = answer.get("start"), answer.get("source")
    status = answer.get("source_status")
    round_ = answer.get("next_round")
    if start == "resume":
        item = answer.get("item_index")
        at = f", item index {item}" if item is not None else ""
        return f"resume run {source} ({status}) at round {round_}{at}"
    if start in ("thread", "from"):
        return f"pick up from run {source} ({status}), round {round_}"
    if start == "snapshot":
        return f"start from a snapshot{f' of run {source}' if source else ''}, round {round_}"
    return f"start fresh, round {round_ or 1}"


def plan_text(answer: dict[str, Any]) -> str:
    """``plan FLOW`` in words: what ``run`` would do, or the refusal it would meet."""
    refusal = answer.get("refusal")
    lines = []
    if answer.get("start") is not None:
        lines.append(f"run {answer.get('flow')} would {plan_what(answer)}")
        keys = answer.get("state_keys") or []
        lines.append(f"  state keys  {', '.join(keys) if keys else '(none)'}")
        lines.append(f"  budget      {budget_words(answer.get('budget'))}")
    drift = answer.get("drift")
    if isinstance(drift, dict):
        if drift.get("drifted"):
            lines.extend(f"  drift       {message}" for message in drift.get("messages") or [])
        else:
            lines.append(f"  drift       none since run {drift.get('source')}")
    for warning in answer.get("warnings") or []:
        if not (isinstance(drift, dict) and warning in (drift.get("messages") or [])):
            lines.append(f"  warning     {warning}")
    if isinstance(refusal, dict):
        lines.append(
            f"refused: {refusal.get('message')} ({refusal.get('code')}, exit {refusal.get('exit')})"
        )
    return "\n".join(lines)


def size_words(count: int) -> str:
    """``12.3 MB``: bytes for a person."""
    value = float(count)
    for unit in ("B", "kB", "MB", "GB", "TB"):
        if value < 1000 or unit == "TB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1000
    return f"{count} B"


def usage_words(runs: int, used: int) -> str:
    """The workspace's size: ``1,204 runs, 35.2 MB on disk``."""
    return f"{runs:,} run{'' if runs == 1 else 's'}, {size_words(used)} on disk"


_WHY_WORDS = {
    "live": "live",
    "paused": "paused",
    "pinned": "pinned",
    "pick_up": "picked up next",
    "latest_state": "its key's latest state (its flow cannot be picked up today)",
    "last_run": "last run of its key",
    "newest": "among the newest",
    "recent": "ended recently",
    "replaced": "a fresh start looked past it (--include-replaced lets it go)",
    "replacing": "started fresh past a run kept as replaced",
    "unreadable": "unreadable record",
}


def why_words(reasons: list[str], keys: list[str]) -> str:
    """Why a run stays, in words: ``pinned, picked up next (nightly)``."""
    words = [_WHY_WORDS.get(r, r) for r in reasons]
    return ", ".join(words) + (f" ({', '.join(keys)})" if keys else "")


def prune_text(report: dict[str, Any]) -> str:
    """``prune``'s answer: per flow what goes and what stays, every run kept for a
    reason other than being among the newest, and the orphaned transcripts."""
    dry = report["dry_run"]
    gone, kept = report["delete"], report["kept"]
    verb = "would delete" if dry else "deleted"
    lines = [
        f"{verb} {len(gone):,} of {report['runs']:,} runs and "
        f"{len(report['orphans']):,} orphaned transcripts ({size_words(report['bytes'])}); "
        f"kept {len(kept):,} (newest {report['keep']} per flow"
        + (", all of a flow with fewer" if report["keep"] else "")
        + (f", ended in the last {report['older_than']:g} s" if report["older_than"] else "")
        + ")"
    ]
    flows: dict[str, list[int]] = {}
    for row in gone:
        flows.setdefault(str(row.get("flow")), [0, 0])[0] += 1
    for row in kept:
        flows.setdefault(str(row.get("flow")), [0, 0])[1] += 1
    if flows:
        lines.append(
            _table(
                ["FLOW", "DELETE" if dry else "DELETED", "KEEP"],
                [[name, f"{d:,}", f"{k:,}"] for name, (d, k) in sorted(flows.items())],
            )
        )
    special = [row for row in kept if row.get("reasons") != ["newest"]]
    if special:
        lines.append("kept for a reason of their own:")
        for row in special:
            why = why_words(row.get("reasons") or [], row.get("keys") or [])
            lines.append(f"  {row['run']}  {row.get('flow')}  {row.get('status')}: {why}")
    if report.get("cache_corrected"):
        lines.append(
            f"{len(report['cache_corrected']):,} runs' flows in .flowdrop/cache/runs.json "
            "disagreed with their records: the records were used, the cache relearnt"
        )
    for row in report.get("skipped") or []:
        lines.append(f"  skipped {row['run']}: it became {row['why']} while pruning")
    if dry and gone:
        lines.append("(dry run: nothing was deleted; --json lists every run)")
    if report.get("leftovers_swept"):
        lines.append(f"finished deleting {report['leftovers_swept']} runs a stopped prune left")
    for lane in report.get("lanes") or []:  # SPEC §23: landed or merged, and clean
        tree, branch = lane["worktree"], lane["branch"]
        lines.append(
            f"{'would drop' if dry else 'dropped'} lane {lane['key']}'s worktree "
            f"{tree['path']} ({tree['why']}); branch {branch['done']} ({branch['why']})"
        )
    return "\n".join(lines)


def inbox_lines(items: list[dict[str, Any]]) -> list[str]:
    """``inbox``: one item per two lines (what, then the command that acts on it)."""
    if not items:
        return ["nothing waits on you"]
    lines = []
    for item in items:
        lines.append(f"{item['id']}  {item['flow']}  {item['message']}")
        lines.append(f"    {item['action']}: {item['command']}")
    return lines


def answer_words(run_id: str, gate: dict[str, Any]) -> str:
    """How to answer a run's open question (SPEC §21)."""
    choices = gate.get("choices")
    shown = " | ".join(choices) if isinstance(choices, list) else "ANSWER"
    return f"answer it with: flowdrop-tui answer {run_id} {shown}"
