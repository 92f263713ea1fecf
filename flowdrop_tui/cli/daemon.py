"""``worker``: remote mode's daemon, a process per machine taking runs from the cluster."""

from __future__ import annotations

import argparse
from typing import Any

import orjson

from flowdrop_tui.cli import workspace
from flowdrop_tui.cli.ending import WithoutTeardown, failed
from flowdrop_tui.cli.output import err, out
from flowdrop_tui.cli.parser import Parser
from flowdrop_tui.core.errors import FlowdropError
from flowdrop_tui.core.mode import serve_worker
from flowdrop_tui.core.paths import Layout


def cmd_worker(args: argparse.Namespace) -> WithoutTeardown:
    """Flags first, then ``FLOWDROP_*``, then the workspace's config (if in one). With
    ``--json``: one JSON line on stdout once it polls (SPEC §11). However it ends, the
    process leaves without the teardown: Temporal's client may have left threads."""
    try:
        layout: Layout | None = workspace.layout(args)
    except FlowdropError:
        layout = None

    def ready(facts: dict[str, Any]) -> None:
        """``--json``: one line on stdout once it polls; the words stay on stderr."""
        out(orjson.dumps({"ready": True, **facts}).decode())

    try:
        return WithoutTeardown(
            serve_worker(
                layout,
                err,
                ready if args.json else None,
                temporal=args.temporal,
                postgres=args.postgres,
                namespace=args.namespace,
                task_queue=args.task_queue,
                worker_id=args.id,
                home=args.home,
                max_runs=args.max_runs,
                spaces=args.space,
                origins=args.origin,
            )
        )
    except (FlowdropError, KeyboardInterrupt, BrokenPipeError) as exc:
        return WithoutTeardown(failed(exc, args.json, args.warnings))


def worker_arguments(verb: Parser) -> None:
    verb.description = (
        "Poll Temporal for runs of flows and run them here, each in a git worktree"
        " of the asked commit; records go to PostgreSQL. Servers come from the flags, else"
        " FLOWDROP_TEMPORAL/FLOWDROP_POSTGRES/…, else the workspace's .flowdrop/config.toml"
        " [remote]. Ctrl-C or SIGTERM asks its runs to stop after their round, then exits."
    )
    verb.add_argument("--id", help="this worker's id (default: HOST-PID); names its own queue")
    verb.add_argument(
        "--home",
        metavar="DIR",
        help="where its mirror clones and worktrees live (default: ~/.flowdrop-worker)",
    )
    verb.add_argument(
        "--max-runs", type=_positive, default=4, metavar="N", help="runs at once (default 4)"
    )
    verb.add_argument("--temporal", metavar="HOST:PORT", help="the Temporal frontend")
    verb.add_argument("--namespace", help="the Temporal namespace (default: default)")
    verb.add_argument("--task-queue", metavar="NAME", help="the shared queue (default: flowdrop)")
    verb.add_argument("--postgres", metavar="URL", help="the PostgreSQL URL of the records")
    verb.add_argument(
        "--space",
        action="append",
        default=[],
        metavar="SPACE",
        help="serve only this space (repeatable; default: any); others are refused",
    )
    verb.add_argument(
        "--origin",
        action="append",
        default=[],
        metavar="URL",
        help="run code only from this git origin (repeatable; default: any)",
    )


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of runs (1 or more)")
    return value
