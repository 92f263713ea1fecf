"""``flowdrop-tui serve``: the terminal UI of one workspace, in a browser, through textual-serve.

Each browser tab's websocket gets its own ``flowdrop-tui --workspace WS`` process
(the same UI as in a terminal, driven by Textual's web driver). Runs it starts are
detached exactly as from a terminal, so closing the tab or stopping the server
stops no run. Ctrl-C (or SIGTERM) stops listening, asks each UI process to quit,
and kills one that has not within a grace period: nothing is left behind.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import ipaddress
import logging
import os
import signal
import socket
import sys
from asyncio.subprocess import Process
from pathlib import Path
from typing import Any

import aiohttp_jinja2
import orjson
from aiohttp import web
from textual_serve.app_service import AppService
from textual_serve.server import Server, to_int

from flowdrop_tui.core.errors import FlowdropError, UsageError
from flowdrop_tui.core.paths import Layout
from flowdrop_tui.serve.access import TOKEN_ENV, Access
from flowdrop_tui.serve.textual_serve_compat import base_app, base_environment, relay_messages

TEMPLATES = Path(__file__).with_name("templates")
QUIT_GRACE = 5.0  # seconds a UI process has to quit before it is killed
# One UI process per websocket: at most this many at once (a page reloaded in a loop, or
# a script opening websockets, had started one process each with no end).
MAX_UIS = 8
MAX_UIS_ENV = "FLOWDROP_SERVE_MAX_UIS"  # another cap, for a bigger team or the tests

log = logging.getLogger("flowdrop_tui.serve")


class UiProcess(AppService):
    """One browser tab's UI process: started without a shell, in its own session
    (a Ctrl-C at the server's terminal reaches the server, which closes the UIs
    itself), and killed if it does not quit when asked."""

    def __init__(self, argv: list[str], cwd: Path, **kwargs: Any) -> None:
        super().__init__(" ".join(argv), **kwargs)
        self.argv = argv
        self.cwd = cwd

    def environment(self, width: int, height: int) -> dict[str, str]:
        environment = base_environment(self, width, height)
        # The UI's runs, and the agents they start, have no use for the secret.
        environment.pop(TOKEN_ENV, None)
        return environment

    async def _open_app_process(self, width: int = 80, height: int = 24) -> Process:
        # textual-serve's hook (textual_serve_compat.HOOKS): its own starts a shell.
        self._process = process = await asyncio.create_subprocess_exec(
            *self.argv,
            cwd=self.cwd,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=self.environment(width, height),
            start_new_session=True,
        )
        assert process.stdin is not None
        self._stdin = process.stdin
        return process

    async def close(self) -> None:
        """Ask the UI to quit; kill it after ``QUIT_GRACE`` seconds; reap it."""
        process = self._process
        if process is None:
            return
        if process.returncode is None:
            with contextlib.suppress(ConnectionError, RuntimeError):
                await self.send_meta({"type": "quit"})
            try:
                await asyncio.wait_for(process.wait(), QUIT_GRACE)
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError):
                    process.kill()
                await process.wait()
        if self._task is not None:
            await self._task
            self._task = None


class FlowdropServer(Server):
    """textual-serve's server with flowdrop's access checks in front of every route."""

    def __init__(self, layout: Layout, host: str, port: int, access: Access) -> None:
        super().__init__(
            command="flowdrop-tui",
            host=host,
            port=port,
            title=f"flowdrop-tui · {layout.workspace.name}",
            templates_path=TEMPLATES,
        )
        self.layout = layout
        self.access = access
        self.argv = [sys.executable, "-m", "flowdrop_tui", "--workspace", str(layout.workspace)]
        self.sockets: set[web.WebSocketResponse] = set()
        self.uis: set[UiProcess] = set()
        self.max_uis = MAX_UIS
        self.open_uis = 0  # counted before the handshake: two at once cannot both pass
        self.as_json = False  # ``serve --json``: the address as one JSON line

    async def make_app(self) -> web.Application:
        """textual-serve's application, every request passing the access checks first."""
        app = await base_app(self)
        app.middlewares.append(self.access.middleware)
        return app

    async def on_startup(self, app: web.Application) -> None:
        """Quiet: ``serve`` prints the URL itself once the socket is bound."""

    async def on_shutdown(self, app: web.Application) -> None:
        await asyncio.gather(*(ui.close() for ui in list(self.uis)), return_exceptions=True)
        for websocket in list(self.sockets):
            await websocket.close()

    @aiohttp_jinja2.template("app_index.html")
    async def handle_index(self, request: web.Request) -> dict[str, Any]:
        # Built from the address the browser used, not the bind address: 0.0.0.0 is
        # nowhere to connect to. The access middleware has vetted the Host header.
        scheme = "wss" if request.secure else "ws"
        return {
            "font_size": to_int(request.query.get("fontsize", "16"), 16),
            "app_websocket_url": f"{scheme}://{request.host}/ws",
            "config": {"static": {"url": "/static/"}},
            "application": {"name": self.title},
        }

    async def handle_websocket(self, request: web.Request) -> web.WebSocketResponse:
        if self.open_uis >= self.max_uis:
            why = (
                f"{self.open_uis} UIs are open already, the most this server runs at once "
                f"(set {MAX_UIS_ENV} for another limit); close a tab and reload"
            )
            log.warning("a browser's UI was refused: %s", why)
            raise web.HTTPServiceUnavailable(
                text=f"flowdrop-tui serve: {why}\n", headers={"Cache-Control": "no-store"}
            )
        self.open_uis += 1
        try:
            return await self._one_ui(request)
        finally:
            self.open_uis -= 1

    async def _one_ui(self, request: web.Request) -> web.WebSocketResponse:
        websocket = web.WebSocketResponse(heartbeat=15)
        width = to_int(request.query.get("width", "80"), 80)
        height = to_int(request.query.get("height", "24"), 24)
        await websocket.prepare(request)
        ui = UiProcess(
            self.argv,
            self.layout.workspace,
            write_bytes=websocket.send_bytes,
            write_str=websocket.send_str,
            close=websocket.close,
            download_manager=self.download_manager,
        )
        self.sockets.add(websocket)
        self.uis.add(ui)
        try:
            await ui.start(width, height)
            await relay_messages(self, websocket, ui)
        except (asyncio.CancelledError, ConnectionError):
            pass
        except Exception:
            log.exception("the browser session ended on an error")
        finally:
            self.sockets.discard(websocket)
            self.uis.discard(ui)
            await ui.close()
            await websocket.close()
        return websocket


def _url_host(host: str, bound: str) -> str:
    """The host to print in the URL: the one asked for, or this machine's name for
    'every interface'."""
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return host or socket.gethostname()
    if ip.is_unspecified:
        return socket.gethostname()
    return f"[{bound}]" if ip.version == 6 else bound


def _cannot_listen(host: str, port: int, exc: OSError) -> str:
    why = os.strerror(exc.errno) if exc.errno else str(exc)
    advice = {
        errno.EADDRINUSE: "something else listens there: pick another with --port",
        errno.EADDRNOTAVAIL: "that address is not one of this machine's: see --host",
        errno.EACCES: "that port needs privileges: pick one above 1023 with --port",
    }.get(exc.errno or 0, "see --host and --port")
    return f"cannot listen on {host or '*'} port {port}: {why.lower()} ({advice})"


async def _serve(server: FlowdropServer) -> None:
    # Before binding, so a Ctrl-C that comes early is still a clean stop, not a traceback.
    stopping = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        loop.add_signal_handler(signum, stopping.set)
    app = await server.make_app()
    runner = web.AppRunner(app, handle_signals=False, access_log=None, shutdown_timeout=QUIT_GRACE)
    await runner.setup()
    try:
        site = web.TCPSite(runner, server.host or None, server.port)
        try:
            await site.start()
        except OSError as exc:
            raise FlowdropError(_cannot_listen(server.host, server.port, exc)) from exc
        bound_host, bound_port = runner.addresses[0][:2]
        server.access.port = bound_port  # --port 0 picks one
        url = f"http://{_url_host(server.host, bound_host)}:{bound_port}/"
        if server.access.token is not None:
            url += f"?token={server.access.token}"
        if server.as_json:  # SPEC §11: one line once it listens, for a script to read
            ready = {
                "ready": True,
                "url": url,
                "host": server.host,
                "port": bound_port,
                "token": server.access.token,
                "workspace": str(server.layout.workspace),
                "pid": os.getpid(),
            }
            print(orjson.dumps(ready).decode(), flush=True)
        else:
            print(url, flush=True)
        where = "this machine only" if server.access.token is None else "anyone with the token"
        print(
            f"flowdrop-tui serve: the UI of {server.layout.workspace} for {where};"
            " whoever opens it can start and stop runs. Ctrl-C stops serving (runs go on).",
            file=sys.stderr,
            flush=True,
        )
        await stopping.wait()
    finally:
        await runner.cleanup()


def max_uis() -> int:
    """The cap on UI processes: ``$FLOWDROP_SERVE_MAX_UIS`` (a whole number ≥ 1), else
    ``MAX_UIS``."""
    given = os.environ.get(MAX_UIS_ENV)
    if given is None or given == "":
        return MAX_UIS
    try:
        value = int(given)
    except ValueError:
        value = 0
    if value < 1:
        raise UsageError(f"{MAX_UIS_ENV}={given!r} is not a whole number of 1 or more")
    return value


def serve(layout: Layout, host: str, port: int, access: Access, *, as_json: bool = False) -> int:
    """Serve until SIGINT/SIGTERM/SIGHUP; returns the exit status. ``as_json``: the
    address is said as one JSON line (``serve --json``)."""
    logging.basicConfig(level=logging.WARNING, format="flowdrop-tui serve: %(message)s")
    # The app and the access rules are built inside the running loop (aiohttp wants one).
    server = FlowdropServer(layout, host, port, access)
    server.as_json = as_json
    server.max_uis = max_uis()
    asyncio.run(_serve(server))
    return 0


__all__ = ["TOKEN_ENV", "FlowdropServer", "serve"]
