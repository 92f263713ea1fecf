"""``land``: a lane's branch into a branch, when a person says so (SPEC §23)."""

from __future__ import annotations

import argparse

from flowdrop_tui.cli import workspace
from flowdrop_tui.cli.output import dump, out
from flowdrop_tui.cli.parser import Parser


def cmd_land(args: argparse.Namespace) -> int:
    from flowdrop_tui.core import mode
    from flowdrop_tui.core.lanes import landing  # only `land` loads the landing

    layout = workspace.layout(args)
    landed = landing.land(
        layout,
        args.lane,
        into=args.into,
        method=args.method or "merge",
        remote=mode.lanes_on_origin(layout),  # its branch fetched from the origin first
    )
    if args.json:
        out(dump(landed))
    else:
        out(
            f"landed {landed['lane']} into {landed['into']} by {landed['method']}: "
            f"{landed['commit'][:12]}"
        )
    return 0


def land_arguments(verb: Parser) -> None:
    verb.description = (
        "Land a lane's committed work into a branch (default: the branch it was made "
        "from). Refused, changing nothing, when the lane runs, when its tree or the "
        "target's checkout has uncommitted changes, or on a conflict."
    )
    verb.add_argument("lane", metavar="FLOW@LANE", help="the lane to land")
    verb.add_argument(
        "--into", metavar="BRANCH", help="the branch to land into (default: the lane's base)"
    )
    how = verb.add_mutually_exclusive_group()
    for method, what in (
        ("merge", "one merge commit, --no-ff (the default)"),
        ("squash", "one new commit holding the lane's changes"),
        ("rebase", "the lane's commits replayed onto the branch, which is fast-forwarded"),
    ):
        how.add_argument(
            f"--{method}", dest="method", action="store_const", const=method, help=what
        )
