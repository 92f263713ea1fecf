"""``inbox``: what waits on a person (SPEC §21), and dismissing an item."""

from __future__ import annotations

import argparse

from flowdrop_tui.cli import workspace
from flowdrop_tui.cli.output import dump, err
from flowdrop_tui.cli.parser import Parser
from flowdrop_tui.core import inbox
from flowdrop_tui.format import inbox_lines


def cmd_inbox(args: argparse.Namespace) -> int:
    mode = workspace.mode(args)
    mode.sync()
    layout = mode.layout
    for problem in mode.notice_problems():
        err(f"warning: {problem}")
    if args.dismiss:
        done = inbox.dismiss(layout, list(args.dismiss))
        if args.json:
            print(dump({"dismissed": done}))
        else:
            print(f"dismissed {', '.join(done)}")
        return 0
    # Notices go from where runs run: locally this viewer sends a died run's; in
    # remote mode the worker holding the run sends them all (docs/remote.md)
    found = mode.inbox()
    if args.json:
        print(dump(found))
    else:
        for line in inbox_lines(found):
            print(line)
    return 0


def inbox_arguments(verb: Parser) -> None:
    verb.add_argument(
        "--dismiss", metavar="ID", action="append", help="dismiss an item (repeatable)"
    )
