"""What ``run`` and ``resume`` share: the options as the core takes them, the flow
checked first, a run in the foreground, a detached run's child, a launch reported."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from flowdrop_tui.cli.output import Warnings, dump, err, out
from flowdrop_tui.core.errors import FlowdropError, UsageError
from flowdrop_tui.core.flows.discovery import FlowRef, resolve_flow
from flowdrop_tui.core.paths import Layout
from flowdrop_tui.core.records.log.event_log import side_value
from flowdrop_tui.core.records.run_record.run_fold import load_run
from flowdrop_tui.core.records.run_record.run_info import Status
from flowdrop_tui.core.records.spend.budget import KINDS
from flowdrop_tui.core.run.forecast import StartOptions, runnable
from flowdrop_tui.format import (
    answer_words,
    budget_reached_words,
    error_words,
    lift_words,
    limit_reached_words,
    paused_by_words,
    rounds_range,
    start_words,
)

if TYPE_CHECKING:  # the engine and the launcher: loaded where a run or a child needs them
    from flowdrop_tui.core.run.execution import Execution


def checked_flow(layout: Layout, name: str, ref: FlowRef | None = None) -> FlowRef:
    """Resolve FLOW and load it in a child process first: a broken or hanging flow is
    refused (exit 1, naming file and line) before anything else happens."""
    ref = ref or resolve_flow(layout, name)
    runnable(layout, ref)
    return ref


def options(args: argparse.Namespace) -> StartOptions:
    """What ``run``/``resume``/``plan`` were asked, as the core takes it."""
    snapshot = getattr(args, "snapshot", None)
    limits = {k: getattr(args, f"max_{k}") for k in KINDS if hasattr(args, f"max_{k}")}
    return StartOptions(
        snapshot=Path(snapshot).resolve() if snapshot else None,
        resume=getattr(args, "resume", None),
        from_run=getattr(args, "from_run", None),
        fresh=bool(getattr(args, "fresh", False)),
        limits=limits,
        strict=bool(args.strict),
        limit_wait=getattr(args, "limit_wait", None),
    )


def option_args(options: StartOptions) -> list[str]:
    """The budget and drift flags, passed on to a detached run's process."""
    passed = []
    for kind, value in options.limits.items():
        passed += [f"--max-{kind}", "none" if value is None else str(value)]
    if options.limit_wait is not None:
        passed += ["--limit-wait", f"{options.limit_wait!r}s"]
    return passed + (["--strict"] if options.strict else [])


def lifting_confirmed(args: argparse.Namespace, asked: StartOptions) -> None:
    """``--max-KIND none`` lifts a budget: said once, and done only on a second word —
    ``y`` to the question on a terminal, else ``--yes`` (a script, ``--json``: never
    asked, refused without it, nothing started). The process a launch starts is never
    asked: the command that launched it was."""
    lifted = [kind for kind, value in asked.limits.items() if value is None]
    if not lifted or args.yes or args.handshake_fd is not None:
        return
    words = lift_words(lifted)
    if not args.json and sys.stdin.isatty() and sys.stderr.isatty():
        try:
            sys.stderr.write(f"{words}.\nLift it? [y/N] ")
            sys.stderr.flush()
            reply = sys.stdin.readline().strip().lower()
        except (OSError, ValueError):
            reply = ""
        if reply in ("y", "yes"):
            return
        raise UsageError("the budget stays: nothing was started (--yes lifts it without asking)")
    raise UsageError(f"{words} — add --yes to lift it (nothing was started)")


def asker(given: str | None) -> dict[str, Any]:
    """Who asked for a resume: passed on by a detached launch, else this command."""
    if given:
        try:
            found = orjson.loads(given)
        except orjson.JSONDecodeError:
            found = None
        if isinstance(found, dict):
            return {str(k): v for k, v in found.items() if k in ("pid", "user", "host", "via")}
    return {"via": "cli"}


def _announce(execution: Execution) -> None:
    frame = execution.main
    if execution.resumed_by is not None:
        err(f"resuming run {execution.run_id} of {frame.key} at round {execution.next_round}")
        return
    events = load_run(execution.layout, execution.run_id)
    how = start_words(events.start, events.source, events.snapshot)
    err(f"run {execution.run_id} of {frame.key} — {how}, round {frame.first_round}")


def finish_foreground(execution: Execution, as_json: bool, warnings: Warnings) -> int:
    _announce(execution)
    capture = sys.stderr if as_json else sys.stdout
    outcome = execution.execute(capture=capture)
    info = load_run(execution.layout, outcome.run_id)
    rounds = (
        f"rounds {rounds_range(info.first_round, info.last_round)}"
        if info.last_round
        else "no rounds"
    )
    message = f"run {outcome.run_id} {outcome.status} ({rounds})"
    if outcome.status == Status.PAUSED and info.budget_reached:
        reached = info.budget_reached
        message += (
            f": {budget_reached_words(reached)}; raise it to go on: flowdrop-tui resume "
            f"{outcome.run_id} --max-{reached.get('budget')} N"
        )
    elif outcome.status == Status.PAUSED and info.limit_reached:
        message += (
            f": {limit_reached_words(info.limit_reached)}; continue it (it waits out the rest) "
            f"with: flowdrop-tui resume {outcome.run_id}"
        )
    elif outcome.status == Status.PAUSED and info.open_gate is not None:
        message += f": it asks {info.open_gate['question']!r}; " + answer_words(
            outcome.run_id, info.open_gate
        )
    elif outcome.status == Status.PAUSED and paused_by_words(info.paused_by) is not None:
        message += (
            f": {paused_by_words(info.paused_by)}; "
            f"continue it with: flowdrop-tui resume {outcome.run_id}"
        )
    elif outcome.status == Status.PAUSED:
        message += f"; continue it with: flowdrop-tui resume {outcome.run_id}"
    elif outcome.error:
        message += f": {error_words(outcome.error)}"
    if info.state_refused:  # SPEC §5.3: warned of twice, then counted; `show` names them
        saves = sum(info.state_refused.values())
        values = len(info.state_refused)
        message += (
            f"; {saves} save{'s' if saves != 1 else ''} left out "
            f"{values} state value{'s' if values != 1 else ''} (see: flowdrop-tui show "
            f"{outcome.run_id})"
        )
    err(message)
    if as_json:
        result = side_value(info.path, info.result)  # a big one: from its side file
        answer = {**info.summary(), "result": result, "error": info.error}
        answer["state_refused"] = info.state_refused
        out(dump({**answer, "warnings": warnings.items}))
    return outcome.exit_code


def detached_child(args: argparse.Namespace, make: Callable[[Warnings], Execution]) -> int:
    """This process is a detached run: report creation (or refusal) through the pipe.
    What it warns of goes to the starter through the pipe; once the run exists, also to
    its ``output.log`` (this process's stderr from then on)."""
    from flowdrop_tui.core.control import launch

    fd = int(args.handshake_fd)
    warnings: Warnings = args.warnings
    try:
        execution = make(warnings)
    except FlowdropError as exc:
        launch.report_refusal(fd, exc)
        return exc.exit_code
    launch.report_created(fd, execution.run_dir, execution.run_id, execution.key, warnings.items)
    for warning in warnings.items:  # the run's output.log from now on
        err(f"{Warnings.PREFIX}{warning}")
    return execution.execute().exit_code


def print_launched(answer: dict[str, Any], args: argparse.Namespace, *, elsewhere: bool) -> int:
    """The run exists (in the background here, or on a worker); ``elsewhere``: the user
    asked for a foreground run, which the mode starts elsewhere all the same."""
    warnings: Warnings = args.warnings
    for warning in answer.get("warnings") or []:
        warnings.add(str(warning))
    if args.json:
        launched = {"run": answer.get("run"), "flow": answer.get("flow")}
        print(dump({**launched, "warnings": warnings.items}))
    else:
        print(answer.get("run"))
    if elsewhere:
        err(
            f"run {answer.get('run')} is on worker {answer.get('worker')}; follow it with: "
            f"flowdrop-tui logs -f {answer.get('run')}"
        )
    return 0
