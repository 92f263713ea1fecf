"""``run`` and ``plan``: start a flow (picking up when it can), or say what that would do."""

from __future__ import annotations

import argparse
import contextlib
from typing import TYPE_CHECKING, Any

from flowdrop_tui.cli import workspace
from flowdrop_tui.cli.launching import (
    checked_flow,
    detached_child,
    finish_foreground,
    lifting_confirmed,
    option_args,
    options,
    print_launched,
)
from flowdrop_tui.cli.output import Warnings, dump, err
from flowdrop_tui.cli.parser import Parser, budget, start_choice, yes
from flowdrop_tui.core.errors import FlowdropError
from flowdrop_tui.core.flows.discovery import FlowRef, resolve_flow
from flowdrop_tui.core.paths import Layout, split_lane
from flowdrop_tui.core.run.forecast import forecast_flow
from flowdrop_tui.format import plan_text

if TYPE_CHECKING:  # the engine: loaded by a run in this process, not by a launch
    from flowdrop_tui.core.run.execution import Execution


def path_thread_words(layout: Layout, ref: FlowRef) -> str | None:
    """A flow run by the path of a flow that also has a name (``run flows/tick/``, as
    shell completion gives it) runs the thread keyed by that path, not the name's
    (SPEC §2): said, naming the name's command (docs/decisions.md, "What a newcomer
    tripped on")."""
    if (
        split_lane(ref.key)[0] == ref.name
        or ref.folder.resolve() != (layout.flows / ref.name).resolve()
    ):
        return None
    return (
        f"{ref.key} is run by its path: its thread (key {ref.key!r}) is not the thread "
        f"of {ref.name!r} — separate state and rounds, listed as its own row by "
        f"flowdrop-tui flows; to go on with {ref.name}'s thread: flowdrop-tui run {ref.name}"
    )


def cmd_run(args: argparse.Namespace) -> int:
    layout = workspace.layout(args)
    ref = checked_flow(layout, args.flow)
    asked = options(args)
    lifting_confirmed(args, asked)
    if args.handshake_fd is None:
        by_path = path_thread_words(layout, ref)
        if by_path is not None:
            args.warnings.add(by_path)
        mode = workspace.mode(args)

        def start() -> dict[str, Any]:
            return mode.start(ref, asked, option_args(asked), say=err)

        if args.detach:
            return print_launched(start(), args, elsewhere=False)
        elsewhere = mode.started_elsewhere(start)
        if elsewhere is not None:
            return print_launched(elsewhere, args, elsewhere=True)

    def make(warnings: Warnings) -> Execution:
        from flowdrop_tui.core.run.opening import open_run

        return open_run(layout, ref, options=asked, notify=warnings)

    if args.handshake_fd is not None:
        return detached_child(args, make)
    return finish_foreground(make(args.warnings), args.json, args.warnings)


def cmd_plan(args: argparse.Namespace) -> int:
    """What ``run`` would do, doing nothing; exits as ``run`` would refuse (0: it would
    start), so ``plan FLOW && run FLOW`` reads as it should."""
    layout = workspace.read_layout(args)
    found = forecast_flow(layout, args.flow, options(args))
    answer = found.to_json()
    with contextlib.suppress(FlowdropError):  # a flow not found: the refusal says so
        by_path = path_thread_words(layout, resolve_flow(layout, args.flow))
        if by_path is not None:
            answer["warnings"].insert(0, by_path)
    print(dump(answer) if args.json else plan_text(answer))
    return found.refusal.exit_code if found.refusal is not None else 0


def run_arguments(verb: Parser) -> None:
    budget(verb)
    start_choice(verb)
    verb.add_argument("--detach", action="store_true", help="run in the background")
    verb.add_argument("--handshake-fd", type=int, help=argparse.SUPPRESS)
    yes(verb)


def plan_arguments(verb: Parser) -> None:
    budget(verb)
    start_choice(verb)
