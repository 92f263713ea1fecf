"""``remote config notify``: a space's notice settings, kept in PostgreSQL and used by
the worker that runs each run (docs/remote.md, "Notices"). Its arguments live here, with
the command (``cli/verb_registry.py``)."""

from __future__ import annotations

import argparse

import orjson

from flowdrop_tui.cli import workspace
from flowdrop_tui.cli.output import dump
from flowdrop_tui.cli.parser import Parser
from flowdrop_tui.core.mode import space_notify


def remote_config_notify_arguments(verb: Parser) -> None:
    """``remote config notify [KEY=VALUE …] [--unset KEY]``."""
    verb.description = (
        "The space's notice settings, the keys of .flowdrop/config.toml [notify]"
        " but terminal: command, webhook, desktop, completed, retry, timeout. Each value as"
        ' TOML writes it (completed=true, command=\'["prog", "arg"]\'), a plain word as'
        " a string. The worker that runs a run sends its notices, once; clients send none."
    )
    verb.add_argument("settings", nargs="*", metavar="KEY=VALUE", help="set these")
    verb.add_argument(
        "--unset", action="append", default=[], metavar="KEY", help="remove this setting"
    )


def cmd_remote_config_notify(args: argparse.Namespace) -> int:
    space, table = space_notify(workspace.layout(args), args.settings, args.unset)
    if args.json:
        print(dump({"space": space, "notify": table}))
    elif not table:
        print(
            f"space {space} sends no notices; set where they go, e.g.: flowdrop-tui "
            "remote config notify command='[\"notify-team\"]' completed=true"
        )
    else:
        print(f"space {space}: [notify]")
        for key, value in table.items():
            print(f"{key} = {orjson.dumps(value).decode()}")
    return 0
