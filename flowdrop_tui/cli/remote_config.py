"""``remote config notify``: a space's notice settings, kept in PostgreSQL and used by
the worker that runs each run (docs/remote.md, "Notices"). Its grammar lives here, whole,
so the parser gains it in one call (``add_to``)."""

from __future__ import annotations

import argparse
from typing import Any

import orjson

from flowdrop_tui.cli import granting, workspace
from flowdrop_tui.cli.output import dump
from flowdrop_tui.core.mode import space_notify


def add_to(sub: Any, common: argparse.ArgumentParser, json_flag: argparse.ArgumentParser) -> None:
    """``remote config notify [KEY=VALUE …] [--unset KEY]`` under ``sub``."""
    remote = sub.add_parser("remote", help="remote mode's settings kept in PostgreSQL")
    groups = remote.add_subparsers(dest="remote_group", metavar="GROUP", required=True)
    granting.add_to(groups, common, json_flag)  # remote grant
    config = groups.add_parser("config", help="a space's settings")
    settings = config.add_subparsers(dest="remote_setting", metavar="SETTING", required=True)
    notify = settings.add_parser(
        "notify",
        parents=[common, json_flag],
        help="where the space's notices go (shown when given nothing)",
        description="The space's notice settings, the keys of .flowdrop/config.toml [notify]"
        " but terminal: command, webhook, desktop, completed, retry, timeout. Each value as"
        ' TOML writes it (completed=true, command=\'["prog", "arg"]\'), a plain word as'
        " a string. The worker that runs a run sends its notices, once; clients send none.",
    )
    notify.add_argument("settings", nargs="*", metavar="KEY=VALUE", help="set these")
    notify.add_argument(
        "--unset", action="append", default=[], metavar="KEY", help="remove this setting"
    )


def cmd_remote(args: argparse.Namespace) -> int:
    if args.remote_group == "grant":
        return granting.cmd_grant(args)
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
