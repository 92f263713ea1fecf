"""``remote grant``: who may do what in remote mode (docs/remote.md, "Who can do
what"), its grammar and its handler in one place.

``flowdrop-tui remote grant ROLE DBROLE [--space S] [--revoke]`` makes the four roles
(the SQL docs/remote.md shows), makes the PostgreSQL role ``DBROLE`` a member of
``flowdrop_ROLE`` and, for an operator, records the grant for the space. Local mode
has no roles: it refuses (exit 2)."""

from __future__ import annotations

import argparse
from typing import Any

from flowdrop_tui.cli.output import dump
from flowdrop_tui.core.errors import UsageError

ROLES = ("viewer", "operator", "worker", "admin")  # core/remote/grants.py's, in order


def add_to(groups: Any, *parents: argparse.ArgumentParser) -> None:
    """``grant`` under ``remote`` (``groups``: its subparsers, ``cli/remote_config.py``)."""
    grant = groups.add_parser(
        "grant",
        parents=list(parents),
        help="give a database role a flowdrop role (--revoke: take it back)",
        description="Make DBROLE a viewer (reads), operator (starts, stops, pauses, answers,"
        " pins in --space), worker (what a worker writes) or admin (prune, bump, reap, grants)."
        " Run as the tables' owner with CREATEROLE, or a superuser.",
    )
    grant.add_argument("role", metavar="ROLE", help="viewer, operator, worker or admin")
    grant.add_argument("dbrole", metavar="DBROLE", help="the PostgreSQL role (it must exist)")
    grant.add_argument(
        "--space",
        metavar="SPACE",
        help="an operator's space (default: this workspace's; *: every space)",
    )
    grant.add_argument("--revoke", action="store_true", help="take the role back")


def cmd_grant(args: argparse.Namespace) -> int:
    if args.role not in ROLES:
        raise UsageError(f"unknown role {args.role!r}: give one of {', '.join(ROLES)}")
    from flowdrop_tui.cli import workspace

    done = workspace.mode(args).grant(args.role, args.dbrole, args.space, revoke=args.revoke)
    if args.json:
        print(dump(done))
        return 0
    where = f" in space {done['space']}" if args.role == "operator" else ""
    if args.revoke:
        said = "is no longer" if done["changed"] else "was not"
    else:
        said = "is now" if done["changed"] else "was already"
    print(
        f"role {args.dbrole} {said} {'an' if args.role[0] in 'aeiou' else 'a'} {args.role}{where}"
    )
    return 0
