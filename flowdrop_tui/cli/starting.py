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
from flowdrop_tui.core.errors import FlowdropError, UsageError
from flowdrop_tui.core.flows.declaration import MAX_LANES
from flowdrop_tui.core.flows.discovery import FlowRef, resolve_flow
from flowdrop_tui.core.paths import Layout, split_lane, validate_lane
from flowdrop_tui.core.run.forecast import StartOptions, forecast_flow, runnable
from flowdrop_tui.format import plan_text

if TYPE_CHECKING:  # the engine: loaded by a run in this process, not by a launch
    from flowdrop_tui.core.run.execution import Execution


def path_thread_words(layout: Layout, ref: FlowRef) -> str | None:
    """A flow run by the path of a flow that also has a name (``run flows/tick/``, as
    shell completion gives it) runs the thread keyed by that path, not the name's
    (SPEC §2): said, naming the name's command (docs/decisions.md, "What a newcomer
    tripped on")."""
    base, lane = split_lane(ref.key)  # a lane (SPEC §23) is no path key: FLOW@LANE
    if base == ref.name or ref.folder.resolve() != (layout.flows / ref.name).resolve():
        return None
    name = ref.name if lane is None else f"{ref.name}@{lane}"
    return (
        f"{ref.key} is run by its path: its thread (key {ref.key!r}) is not the thread "
        f"of {name!r} — separate state and rounds, listed as its own row by "
        f"flowdrop-tui flows; to go on with {name}'s thread: flowdrop-tui run {name}"
    )


def lane_asked(args: argparse.Namespace) -> None:
    """``--lane NAME`` is ``FLOW@NAME``; ``--lanes N`` starts lanes 1..N (SPEC §23)."""
    lanes, lane = getattr(args, "lanes", None), getattr(args, "lane", None)
    if lanes is not None and (lane is not None or "@" in args.flow):
        raise UsageError("--lanes N starts lanes 1..N: give it no --lane and no FLOW@LANE")
    if lane is not None:
        if "@" in args.flow:
            raise UsageError(f"{args.flow} names its lane already: drop --lane {lane}")
        validate_lane(lane)
        args.flow = f"{args.flow}@{lane}"


def cmd_run(args: argparse.Namespace) -> int:
    layout = workspace.layout(args)
    lane_asked(args)
    asked = options(args)
    if args.handshake_fd is None and "@" not in args.flow:
        ref = resolve_flow(layout, args.flow)
        declared = runnable(layout, ref).lanes  # @flow(lanes=N): a plain run starts them
        count = args.lanes if args.lanes is not None else declared
        lifting_confirmed(args, asked)
        if count is not None:
            return start_lanes(layout, ref, count, args, asked)
    else:
        ref = checked_flow(layout, args.flow)
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


def start_lanes(
    layout: Layout, ref: FlowRef, count: int, args: argparse.Namespace, asked: StartOptions
) -> int:
    """Lanes 1..``count`` of ``ref``, each started detached by its own key (side by side:
    each waits only for its record); one line per lane in lane order, a refused one named
    with its reason while the others still start (exit 3)."""
    from concurrent.futures import ThreadPoolExecutor

    mode = workspace.mode(args)
    refs = [resolve_flow(layout, f"{args.flow}@{number}") for number in range(1, count + 1)]

    def start(lane_ref: FlowRef) -> dict[str, Any] | FlowdropError:
        try:
            return mode.start(lane_ref, asked, option_args(asked), say=err)
        except FlowdropError as exc:
            return exc

    with ThreadPoolExecutor(max_workers=min(count, 8)) as pool:
        answers = list(pool.map(start, refs))
    rows: list[dict[str, Any]] = []
    for number, (lane_ref, answer) in enumerate(zip(refs, answers, strict=True), 1):
        row: dict[str, Any] = {"run": None, "flow": ref.key, "lane": str(number)}
        row["key"] = lane_ref.key
        if isinstance(answer, FlowdropError):
            row["error"] = {"code": answer.code, "message": answer.message}
            if not args.json:
                err(f"{lane_ref.key} refused ({answer.code}): {answer.message}")
        else:
            row["run"] = answer.get("run")
            for warning in answer.get("warnings") or []:
                args.warnings.add(f"{lane_ref.key}: {warning}")
            if not args.json:
                print(f"{lane_ref.key} {row['run']}")
        rows.append(row)
    if args.json:
        print(dump(rows))
    return 3 if any("error" in row for row in rows) else 0


def cmd_plan(args: argparse.Namespace) -> int:
    """What ``run`` would do, doing nothing; exits as ``run`` would refuse (0: it would
    start), so ``plan FLOW && run FLOW`` reads as it should."""
    layout = workspace.read_layout(args)
    lane_asked(args)
    found = forecast_flow(layout, args.flow, options(args))
    answer = found.to_json()
    with contextlib.suppress(FlowdropError):  # a flow not found: the refusal says so
        by_path = path_thread_words(layout, resolve_flow(layout, args.flow))
        if by_path is not None:
            answer["warnings"].insert(0, by_path)
    print(dump(answer) if args.json else plan_text(answer))
    return found.refusal.exit_code if found.refusal is not None else 0


def _lane_count(text: str) -> int:
    try:
        count = int(text)
    except ValueError:
        count = 0
    if not 1 <= count <= MAX_LANES:
        raise argparse.ArgumentTypeError(
            f"--lanes takes a whole number 1..{MAX_LANES}, not {text!r}"
        )
    return count


def lane_arguments(verb: Parser) -> None:
    verb.add_argument(
        "--lane",
        metavar="NAME",
        help="run this lane of the flow (as FLOW@NAME): its own worktree, branch and thread",
    )


def run_arguments(verb: Parser) -> None:
    budget(verb)
    start_choice(verb)
    lane_arguments(verb)
    verb.add_argument(
        "--lanes",
        metavar="N",
        type=_lane_count,
        help="start lanes 1..N of the flow, each detached in its own worktree (a flow's "
        "@flow(lanes=N) does this for a plain run); one line per lane, exit 3 if any "
        "was refused",
    )
    verb.add_argument("--detach", action="store_true", help="run in the background")
    verb.add_argument("--handshake-fd", type=int, help=argparse.SUPPRESS)
    yes(verb)


def plan_arguments(verb: Parser) -> None:
    budget(verb)
    start_choice(verb)
    lane_arguments(verb)
