"""``remote grant``: who may do what in remote mode (docs/remote.md, "Who can do
what"), its arguments and its handler in one place (``cli/verb_registry.py``).

``flowdrop-tui remote grant ROLE DBROLE [--space S] [--revoke]`` makes the four roles
(the SQL docs/remote.md shows), makes the PostgreSQL role ``DBROLE`` a member of
``flowdrop_ROLE`` and, for an operator, records the grant for the space. Local mode
has no roles: it refuses (exit 2)."""

from __future__ import annotations

import argparse

from flowdrop_tui.cli.output import dump
from flowdrop_tui.cli.parser import Parser
from flowdrop_tui.core.errors import UsageError

ROLES = ("viewer", "operator", "worker", "admin")  # core/remote/start/grants.py's, in order


def remote_grant_arguments(verb: Parser) -> None:
    """``remote grant ROLE DBROLE [--space S] [--revoke]``."""
    verb.description = (
        "Make DBROLE a viewer (reads), operator (starts, stops, pauses, answers,"
        " pins in --space), worker (what a worker writes) or admin (prune, bump, reap, grants)."
        " Run as the tables' owner with CREATEROLE, or a superuser."
    )
    verb.add_argument("role", metavar="ROLE", help="viewer, operator, worker or admin")
    verb.add_argument("dbrole", metavar="DBROLE", help="the PostgreSQL role (it must exist)")
    verb.add_argument(
        "--space",
        metavar="SPACE",
        help="an operator's space (default: this workspace's; *: every space)",
    )
    verb.add_argument("--revoke", action="store_true", help="take the role back")


def cmd_remote_grant(args: argparse.Namespace) -> int:
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
