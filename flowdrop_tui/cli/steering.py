"""``resume``, ``stop``, ``pause`` and ``answer``: what a person asks of a run, in either mode."""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import orjson

from flowdrop_tui.cli import workspace
from flowdrop_tui.cli.output import Warnings, dump, err
from flowdrop_tui.cli.parser import Parser, budget, run_id, yes
from flowdrop_tui.core.errors import UsageError
from flowdrop_tui.core.records.run_record.run_fold import load_run
from flowdrop_tui.core.records.run_record.run_info import ENDED, LIVE, Status
from flowdrop_tui.format import asked_text

if TYPE_CHECKING:
    from flowdrop_tui.core.control import verbs
    from flowdrop_tui.core.mode import Mode
    from flowdrop_tui.core.run.execution import Execution


def cmd_resume(args: argparse.Namespace) -> int:
    # Only resume runs a flow here: stop and pause never load the run's machinery.
    from flowdrop_tui.cli.launching import (
        asker,
        checked_flow,
        detached_child,
        finish_foreground,
        lifting_confirmed,
        option_args,
        options,
        print_launched,
    )
    from flowdrop_tui.core.control import verbs
    from flowdrop_tui.core.run.opening import flow_of_key, reopen_paused

    layout = workspace.layout(args)
    asked = options(args)
    lifting_confirmed(args, asked)
    if args.handshake_fd is None:
        mode = workspace.mode(args)

        def start() -> dict[str, Any]:
            return mode.resume(args.run, option_args(asked), say=err)

        if args.detach:
            return print_launched(start(), args, elsewhere=False)
        elsewhere = mode.started_elsewhere(start)
        if elsewhere is not None:
            return print_launched(elsewhere, args, elsewhere=True)

    def make(warnings: Warnings) -> Execution:
        # The flow is loaded in this process to continue the run: first in a child,
        # with its 5 s limit, so one that now fails or hangs at import is refused as
        # `run` refuses it, instead of hanging this process with the run held.
        info = verbs.check_resumable(layout, args.run)
        if info.key is not None:
            checked_flow(layout, info.key, flow_of_key(layout, info.key))
        return reopen_paused(
            layout,
            args.run,
            options=asked,
            by=asker(args.by),
            notify=warnings,
            answer=given_answer(args.answer),
        )

    if args.handshake_fd is not None:
        return detached_child(args, make)
    return finish_foreground(make(args.warnings), args.json, args.warnings)


def given_answer(text: str | None) -> dict[str, Any] | None:
    """``resume --answer {"gate", "answer"}``: what a detached answer passes on."""
    if text is None:
        return None
    try:
        found = orjson.loads(text)
    except orjson.JSONDecodeError:
        found = None
    if not (isinstance(found, dict) and isinstance(found.get("gate"), str)):
        raise UsageError('--answer takes {"gate": ID, "answer": TEXT}')
    return {"gate": found["gate"], "answer": str(found.get("answer"))}


def cmd_answer(args: argparse.Namespace) -> int:
    """SPEC §21: answer a run's question; the run resumes in the background."""
    mode = workspace.mode(args)
    done = mode.answer(args.run, args.choice, gate=args.gate, by={"via": "cli"})
    if args.json:
        print(dump({k: done.get(k) for k in ("run", "flow", "gate", "answer", "warnings")}))
    else:
        print(f"answered {done['gate']} of run {done['run']} with {args.choice!r}; resuming it")
    return 0


def cmd_stop(args: argparse.Namespace) -> int:
    mode = workspace.mode(args)
    asked = mode.stop(args.run, now=args.now)
    return _asked(args, mode, asked, lambda s: s in ENDED, 30.0)


def cmd_pause(args: argparse.Namespace) -> int:
    mode = workspace.mode(args)
    asked = mode.pause(args.run)
    return _asked(args, mode, asked, lambda s: s not in LIVE, 3600.0)


def _asked(
    args: argparse.Namespace,
    mode: Mode,
    asked: verbs.Asked,
    done: Callable[[Status], bool],
    timeout: float,
) -> int:
    """Report a stop or pause request; with ``--wait``, once the run has acted on it.
    ``status`` is the run's status as the command returns: a paused run that ``stop``
    closed is ``cancelled`` at once; a live one without ``--wait`` is still ``running``.
    The run is read as every read is: through the mode, brought up to date first."""
    message = asked_text(asked)
    if args.wait:
        status = _wait(mode, args.run, done, timeout)
        message += f"; it is now {status}"
    else:
        mode.sync()
        status = load_run(mode.layout, args.run).status
    if args.json:
        shown = {"run": args.run, "action": str(asked.action), "round": asked.round}
        print(dump({**shown, "message": message, "status": str(status)}))
    else:
        print(message)
    return 0


def _wait(mode: Mode, run_id: str, done: Callable[[Status], bool], timeout: float) -> Status:
    deadline = time.monotonic() + timeout
    while True:
        mode.sync()
        status = load_run(mode.layout, run_id).status
        if done(status) or time.monotonic() > deadline:
            return status
        time.sleep(mode.poll_every)


def stop_arguments(verb: Parser) -> None:
    run_id(verb)
    verb.add_argument("--now", action="store_true", help="interrupt the round in flight")
    verb.add_argument("--wait", action="store_true", help="return once the run has ended")


def pause_arguments(verb: Parser) -> None:
    run_id(verb)
    verb.add_argument("--wait", action="store_true", help="return once the run has paused")


def resume_arguments(verb: Parser) -> None:
    budget(verb)
    run_id(verb)
    verb.add_argument("--detach", action="store_true", help="continue in the background")
    verb.add_argument("--handshake-fd", type=int, help=argparse.SUPPRESS)
    verb.add_argument("--by", help=argparse.SUPPRESS)  # who asked, for a detached resume
    verb.add_argument("--answer", help=argparse.SUPPRESS)  # {"gate", "answer"}: SPEC §21
    yes(verb)


def answer_arguments(verb: Parser) -> None:
    verb.description = (
        "Answer the question a paused run asked (run.ask) and resume the same run"
        " in the background: the round that asked runs again and ask returns the answer."
    )
    run_id(verb)
    verb.add_argument("choice", metavar="ANSWER", help="the answer (one of its choices, if any)")
    verb.add_argument("--gate", metavar="ID", help="the question's id (default: the open one)")
