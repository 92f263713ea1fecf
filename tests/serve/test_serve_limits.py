"""`serve`'s smaller holes (issue 27, item 13): one UI process per websocket with no cap,
the token on the command line (every user's `ps` shows it), and an HTTP/1.0 request
without `Host` let past the loopback check. A real `serve` process each."""

from __future__ import annotations

import asyncio
import socket
import time
from pathlib import Path

import aiohttp

from tests.conftest import wait_for

from .serve_helpers import serving

TOKEN = "tok-" + "y" * 28


def _raw(port: int, request: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=30) as conn:
        conn.sendall(request)
        answer = b""
        while chunk := conn.recv(65536):
            answer += chunk
    return answer


async def test_an_http_1_0_request_without_host_is_refused_on_loopback(workspace: Path) -> None:
    """Guards against a request with no Host header passing the loopback check (aiohttp
    stands this machine's name in for it): a DNS-rebinding page's way in."""
    with serving(workspace) as served:
        refused = await asyncio.to_thread(_raw, served.port, b"GET / HTTP/1.0\r\n\r\n")
        assert refused.startswith(b"HTTP/1.0 403") or refused.startswith(b"HTTP/1.1 403"), refused
        assert b"answers only to localhost" in refused
        named = f"GET / HTTP/1.0\r\nHost: 127.0.0.1:{served.port}\r\n\r\n".encode()
        answered = await asyncio.to_thread(_raw, served.port, named)
        assert answered.split(b" ", 2)[1] == b"200", answered[:200]
        assert served.ui_processes() == []


async def test_ui_processes_are_capped_with_a_clear_message(workspace: Path) -> None:
    """Guards against one UI process per websocket with no end: past the cap the
    handshake is refused (503) saying why, and a tab closed frees its place."""
    with serving(workspace, env={"FLOWDROP_SERVE_MAX_UIS": "1"}) as served:
        async with aiohttp.ClientSession() as session:
            first = await session.ws_connect(f"{served.base}/ws?width=80&height=24")
            assert (await first.receive(timeout=60)).type == aiohttp.WSMsgType.BINARY
            try:
                await session.ws_connect(f"{served.base}/ws")
            except aiohttp.WSServerHandshakeError as exc:
                assert exc.status == 503
            else:
                raise AssertionError("a second UI was started past the cap of 1")
            async with session.get(f"{served.base}/ws") as response:
                assert response.status == 503
                assert "1 UIs are open already" in await response.text()
            assert len(served.ui_processes()) == 1
            await first.close()
            wait_for(lambda: served.ui_processes() == [], timeout=30)
            # the place is free once the closed tab's session has ended on the server too
            # (its process can be gone a moment before): wait for that, never a fixed time
            deadline = time.monotonic() + 30
            while True:
                async with session.get(f"{served.base}/ws") as response:
                    if response.status != 503:
                        break
                assert time.monotonic() < deadline, "a closed tab never freed its place"
                await asyncio.sleep(0.05)
            again = await session.ws_connect(f"{served.base}/ws")
            assert (await again.receive(timeout=60)).type == aiohttp.WSMsgType.BINARY
            await again.close()
        code, err = served.interrupt()
        assert code == 0 and "a browser's UI was refused" in err, err


def test_the_token_on_the_command_line_is_warned_of(workspace: Path) -> None:
    """`--token` still works, with a warning naming the variable; the variable says
    nothing (it is not in the process list)."""
    with serving(workspace, "--token", TOKEN) as served:
        assert served.token == TOKEN
        _, err = served.interrupt()
        assert "--token shows the token to every user" in err and "FLOWDROP_SERVE_TOKEN" in err
    with serving(workspace, env={"FLOWDROP_SERVE_TOKEN": TOKEN}) as served:
        assert served.token == TOKEN
        _, err = served.interrupt()
        assert "--token shows" not in err
