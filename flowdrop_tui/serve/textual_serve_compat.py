"""Every textual-serve private name ``serve/`` calls, each behind one function saying why.

textual-serve has no public API for these; an upgrade (it is pinned exactly in
``pyproject.toml``) must look here first. Each was checked against textual-serve 1.1.3.
``tests/serve/test_textual_serve_compat.py`` fails if textual-serve renames one (or
the hook and attributes ``server.py``'s ``UiProcess`` builds on, ``HOOKS``), and keeps
``server.py`` off them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual_serve.app_service import AppService
from textual_serve.server import Server

if TYPE_CHECKING:
    from aiohttp import web

# What ``server.py`` overrides or sets rather than calls: ``UiProcess`` replaces
# ``_open_app_process`` (started without a shell, in a session of its own), which
# ``AppService.start`` calls, and so sets the process, stdin and task it keeps.
HOOKS: dict[type, tuple[str, ...]] = {
    AppService: ("_open_app_process",),
}
ATTRIBUTES = ("_process", "_stdin", "_task")  # an ``AppService``'s, set in its __init__


def base_environment(service: AppService, width: int, height: int) -> dict[str, str]:
    """The UI process's environment as textual-serve makes it (the web driver's
    variables, the terminal's size) for ``server.py`` to take its secrets out of
    (``AppService._build_environment``; 1.1.3)."""
    return AppService._build_environment(service, width=width, height=height)


async def base_app(server: Server) -> web.Application:
    """textual-serve's aiohttp application — its routes, static files and templates —
    without running it: ``serve`` binds it itself (its own signal handlers, ``--port 0``,
    one line once it listens), where textual-serve's ``Server.serve`` would run it
    (``Server._make_app``; 1.1.3)."""
    return await Server._make_app(server)


async def relay_messages(
    server: Server, websocket: web.WebSocketResponse, service: AppService
) -> None:
    """The browser's messages (keys, resizes, focus) handed to one UI process until its
    websocket closes — textual-serve's ``handle_websocket`` loop, which ``server.py``
    replaces only to cap and count the UIs (``Server._process_messages``; 1.1.3)."""
    await Server._process_messages(server, websocket, service)
