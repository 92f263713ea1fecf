"""``worker``: remote mode's daemon, a process per machine taking runs from the cluster."""

from __future__ import annotations

import argparse
from typing import Any

import orjson

from flowdrop_tui.cli import workspace
from flowdrop_tui.cli.ending import WithoutTeardown, failed
from flowdrop_tui.cli.output import err, out
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
