"""``prune``, ``pin`` and ``unpin``: what is kept (SPEC §16), in either mode."""

from __future__ import annotations

import argparse

from flowdrop_tui.cli import workspace
from flowdrop_tui.cli.output import dump
from flowdrop_tui.cli.parser import Parser, run_id
from flowdrop_tui.core import defaults, retention
from flowdrop_tui.format import prune_text


def cmd_prune(args: argparse.Namespace) -> int:
    older = retention.parse_duration(args.older_than) if args.older_than is not None else None
    result = workspace.mode(args).prune(
        args.keep, older, dry_run=args.dry_run, include_replaced=args.include_replaced
    )
    report = result.as_json()
    print(dump(report) if args.json else prune_text(report))
    return 0


def cmd_pin(args: argparse.Namespace) -> int:
    workspace.read_layout(args)  # the run must be known here (remote mode: synced first)
    return _said(args, workspace.mode(args).pin(args.run), "pinned")


def cmd_unpin(args: argparse.Namespace) -> int:
    workspace.read_layout(args)
    return _said(args, workspace.mode(args).unpin(args.run), "unpinned")


def _said(args: argparse.Namespace, changed: bool, done: str) -> int:
    message = f"run {args.run} {done}" if changed else f"run {args.run} was already {done}"
    if args.json:
        print(dump({"run": args.run, "pinned": done == "pinned", "changed": changed}))
    else:
        print(message)
    return 0


pin_arguments = unpin_arguments = run_id


def prune_arguments(verb: Parser) -> None:
    verb.add_argument(
        "--keep",
        type=_count,
        default=defaults.DEFAULT_KEEP,
        metavar="N",
        help=f"keep the newest N runs of each flow (default {defaults.DEFAULT_KEEP})",
    )
    verb.add_argument(
        "--older-than",
        metavar="DURATION",
        help="delete only runs that ended longer ago than this (30d, 12h, 1d12h)",
    )
    verb.add_argument(
        "--include-replaced",
        action="store_true",
        help="let go of the runs a fresh start looked past (an unresolved --resume)",
    )
    verb.add_argument("--dry-run", action="store_true", help="say what would go; delete nothing")


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of runs (0 or more)")
    return value
