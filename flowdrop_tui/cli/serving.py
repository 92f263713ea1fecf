"""The UI's two doors: the bare command opens it here; ``serve`` serves it to a browser.

Textual, textual-serve and aiohttp are imported here, when asked: no other command
loads them."""

from __future__ import annotations

import argparse
import sys

from flowdrop_tui.cli import workspace
from flowdrop_tui.cli.ending import WithoutTeardown
from flowdrop_tui.cli.parser import Parser
from flowdrop_tui.core.errors import UsageError


def cmd_ui(args: argparse.Namespace) -> WithoutTeardown:
    # Remote mode: synced before the UI opens, so an unreachable server is one line here.
    workspace.read_layout(args)
    from flowdrop_tui.tui.app import run_app  # here, not at the top: commands never load Textual

    code = run_app(workspace.mode(args))
    # The terminal is restored and what the user asked is written: leave without
    # joining the threads of reads still under way, nor tearing down the interpreter's
    # heap (docs/decisions.md, "Quitting the UI"; bench/quit_cold.py).
    return WithoutTeardown(code)


def cmd_serve(args: argparse.Namespace) -> int:
    layout = workspace.layout(args)
    from flowdrop_tui.serve.access import TOKEN_ENV, Access, token_for
    from flowdrop_tui.serve.server import serve

    if not 0 <= args.port <= 65535:
        raise UsageError(f"--port {args.port} is not a port (0-65535)")
    if args.token is not None:
        # Every user of the machine sees a command line (ps): the variable is not shown.
        print(
            "flowdrop-tui serve: warning: --token shows the token to every user of this "
            f"machine in the process list; set {TOKEN_ENV} instead",
            file=sys.stderr,
        )
    token = token_for(args.host, args.token)
    access = Access(token=token, port=args.port)
    return serve(layout, args.host, args.port, access, as_json=args.json)


def serve_arguments(verb: Parser) -> None:
    verb.description = (
        "Serve this workspace's UI to a browser. Whoever opens the URL can start"
        " and stop runs here: any address but loopback needs the token. Ctrl-C stops"
        " serving; runs go on."
    )
    verb.add_argument(
        "--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)"
    )
    verb.add_argument("--port", type=int, default=8765, help="port (default 8765; 0 picks one)")
    verb.add_argument(
        "--token",
        help="the secret a browser must bring (default: $FLOWDROP_SERVE_TOKEN, or one made"
        " up when the address is not loopback); prefer the variable: every user's ps shows"
        " a command line",
    )
