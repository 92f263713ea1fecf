"""Who reaches a served UI: loopback by default, a token anywhere else, checked on
every route before anything of the app answers. Plain HTTP and websocket clients
against a real ``serve`` process; every request goes to 127.0.0.1."""

from __future__ import annotations

import asyncio
import signal
import socket
import subprocess
import sys
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import aiohttp
import orjson
import pytest

from flowdrop_tui.cli import main
from flowdrop_tui.serve.access import bind_is_loopback, is_loopback_address
from tests.conftest import CLI, wait_for

from .serve_helpers import alive, serving

TOKEN = "tok-" + "x" * 28
APP_PATHS = ["/", "/static/js/textual.js", "/static/css/xterm.css", "/download/anything"]


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.0.0.2", True),
        ("127.255.255.254", True),
        ("::1", True),
        ("::ffff:127.0.0.1", True),
        ("localhost", True),
        ("0.0.0.0", False),
        ("::", False),
        ("", False),
        ("10.1.2.3", False),
        ("192.168.0.10", False),
        ("::ffff:10.1.2.3", False),
        ("fe80::1", False),
    ],
)
def test_what_counts_as_loopback(host: str, loopback: bool) -> None:
    """Guards against a bind on every interface (0.0.0.0, ::) or a LAN address being
    served without a token, and against loopback aliases being refused."""
    assert bind_is_loopback(host) is loopback


def test_a_host_header_that_is_not_an_address_is_not_loopback() -> None:
    assert not is_loopback_address("127.0.0.1.evil.example")
    assert not is_loopback_address("")


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--token", "short"], "--token must be at least 16"),
        (["--token", "sixteen chars with spaces"], "--token must be at least 16"),
        (["--token", "é" * 20], "--token must be at least 16"),
        (["--port", "70000"], "--port 70000 is not a port"),
        (["--port", "-1"], "--port -1 is not a port"),
        (["--port", "http"], "invalid int value"),
    ],
)
def test_bad_options_are_refused_before_listening(
    workspace: Path, args: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Guards against a weak or unusable token being accepted, or a bad port
    reaching the socket layer as a traceback. (In process: nothing here listens.)"""
    assert main(["--workspace", str(workspace), "serve", *args]) == 2
    out, err = capsys.readouterr()
    assert says in err
    assert "Traceback" not in err
    assert out == ""


def test_a_port_in_use_is_named(cli: CLI) -> None:
    """Guards against a second server on a taken port failing with a traceback."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = cli("serve", "--port", str(port), timeout=30, check=1)
    assert f"cannot listen on 127.0.0.1 port {port}: address already in use" in done.stderr
    assert "pick another with --port" in done.stderr
    assert "Traceback" not in done.stderr


def test_an_address_of_another_machine_is_named(cli: CLI) -> None:
    """Guards against --host naming an address this machine does not have failing
    with a traceback (192.0.2.1 is TEST-NET-1: nothing is sent, the bind fails)."""
    done = cli("serve", "--host", "192.0.2.1", "--port", "0", timeout=30, check=1)
    assert "cannot listen on 192.0.2.1 port 0: cannot assign requested address" in done.stderr
    assert "not one of this machine's: see --host" in done.stderr
    assert "Traceback" not in done.stderr and done.stdout == ""


def test_a_workspace_that_is_not_there_is_named(cli: CLI, tmp_path: Path) -> None:
    """Guards against serve listening (and handing out a token) for a folder that
    does not exist."""
    missing = tmp_path / "gone"
    done = cli("--workspace", str(missing), "serve", "--port", "0", timeout=30, check=2)
    assert f"workspace '{missing}' is not a folder" in done.stderr
    assert done.stdout == ""


async def _status(session: aiohttp.ClientSession, url: str, **kw: object) -> tuple[int, str]:
    async with session.get(url, allow_redirects=False, **kw) as response:  # type: ignore[arg-type]
        return response.status, await response.text()


async def _ws_status(session: aiohttp.ClientSession, url: str, **kw: object) -> int:
    """The HTTP status a websocket handshake got; 101 when it was accepted (and the
    UI then sent its first screen)."""
    try:
        async with session.ws_connect(url, **kw) as ws:  # type: ignore[arg-type]
            message = await ws.receive(timeout=60)
            assert message.type == aiohttp.WSMsgType.BINARY, message
            return 101
    except aiohttp.WSServerHandshakeError as exc:
        return exc.status


async def test_without_the_token_nothing_of_the_app_answers(workspace: Path) -> None:
    """Guards against any route (page, static file, download, websocket) of a
    non-loopback bind answering, or starting a UI process, without the token."""
    with serving(workspace, "--host", "0.0.0.0", "--token", TOKEN) as served:
        async with aiohttp.ClientSession() as session:
            for path in APP_PATHS:
                status, body = await _status(session, served.base + path)
                assert status == 401, path
                assert body.startswith("flowdrop-tui serve: this address needs the token")
                assert "textual" not in body.lower()
                status, body = await _status(session, f"{served.base}{path}?token=wrong-{TOKEN}")
                assert (status, body) == (403, "flowdrop-tui serve: wrong token\n"), path
                status, _ = await _status(
                    session,
                    served.base + path,
                    headers={"Cookie": f"flowdrop-serve-{served.port}=x"},
                )
                assert status == 403, path
            assert await _ws_status(session, f"{served.base}/ws?width=80&height=24") == 401
            assert await _ws_status(session, f"{served.base}/ws?token={TOKEN[:-1]}") == 403
            assert await _ws_status(session, f"{served.base}/ws?token={TOKEN}x") == 403
            # a token sent to the cookie of another port's server is not this one's
            other = f"flowdrop-serve-{served.port + 1}={TOKEN}"
            assert await _ws_status(session, f"{served.base}/ws", headers={"Cookie": other}) == 401
        # No UI process was ever started for any of these.
        assert served.ui_processes() == []


async def test_with_the_token_the_page_static_files_and_websocket_answer(workspace: Path) -> None:
    """Guards against the token URL not leading to a working UI: the first load moves
    the token into a cookie (and out of the address bar), which then carries the
    static files and the websocket the page opens."""
    with serving(workspace, "--host", "0.0.0.0", "--token", TOKEN) as served:
        assert served.token == TOKEN
        async with aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True)) as session:
            async with session.get(
                f"{served.base}/?token={TOKEN}&fontsize=12", allow_redirects=False
            ) as response:
                assert response.status == 303
                assert response.headers["Location"] == "/?fontsize=12"
                cookie = response.cookies[f"flowdrop-serve-{served.port}"]
                assert cookie.value == TOKEN
                assert cookie["httponly"] is True
                assert cookie["samesite"] == "Strict"
            status, page = await _status(session, f"{served.base}/?fontsize=12")
            assert status == 200
            assert f'data-session-websocket-url="ws://127.0.0.1:{served.port}/ws"' in page
            assert "googleapis" not in page  # the page asks nothing of any other host
            for path in APP_PATHS[1:3]:
                assert (await _status(session, served.base + path))[0] == 200
            assert await _ws_status(session, f"{served.base}/ws?width=100&height=30") == 101
        # A plain client may bring the token on the websocket's own URL instead.
        async with aiohttp.ClientSession() as session:
            assert await _ws_status(session, f"{served.base}/ws?token={TOKEN}") == 101
        # Closing the websocket closes its UI process.
        wait_for(lambda: served.ui_processes() == [], timeout=30)


async def test_a_token_is_made_up_when_none_is_given(workspace: Path) -> None:
    """Guards against a non-loopback bind without --token serving openly, or two
    servers sharing a token."""
    tokens = []
    for _ in range(2):
        with serving(workspace, "--host", "0.0.0.0") as served:
            assert served.token is not None and len(served.token) >= 43
            assert served.url == (
                f"http://{socket.gethostname()}:{served.port}/?token={served.token}"
            )
            async with aiohttp.ClientSession() as session:
                assert (await _status(session, served.base + "/"))[0] == 401
                status, _ = await _status(session, f"{served.base}/?token={served.token}")
                assert status == 303
            tokens.append(served.token)
    assert tokens[0] != tokens[1]


async def test_the_token_can_come_from_the_environment_and_stays_there(
    workspace: Path,
) -> None:
    """Guards against $FLOWDROP_SERVE_TOKEN being ignored, and against the secret
    leaking into the UI process (and so into every run and agent it starts)."""
    env = {"FLOWDROP_SERVE_TOKEN": TOKEN}
    with serving(workspace, "--host", "0.0.0.0", env=env) as served:
        assert served.token == TOKEN
        async with (
            aiohttp.ClientSession() as session,
            session.ws_connect(f"{served.base}/ws?token={TOKEN}") as ws,
        ):
            assert (await ws.receive(timeout=60)).type == aiohttp.WSMsgType.BINARY
            (ui,) = served.ui_processes()
            environ = Path(f"/proc/{ui}/environ").read_bytes().split(b"\0")
            assert not any(item.startswith(b"FLOWDROP_SERVE_TOKEN=") for item in environ)
            assert b"TEXTUAL_DRIVER=textual.drivers.web_driver:WebDriver" in environ


async def test_loopback_answers_only_to_its_own_name_and_its_own_pages(workspace: Path) -> None:
    """Guards against a page on another site driving a loopback server through a
    websocket (no CORS holds a websocket back), or through a DNS name rebound to
    127.0.0.1: without a token, only a loopback Host and a same-origin Origin pass."""
    with serving(workspace) as served:
        assert served.token is None
        assert served.url == f"http://127.0.0.1:{served.port}/"
        base, port = served.base, served.port
        async with aiohttp.ClientSession() as session:
            assert (await _status(session, base + "/"))[0] == 200
            for host in (f"localhost:{port}", f"[::1]:{port}", f"127.0.0.1:{port}"):
                assert (await _status(session, base + "/", headers={"Host": host}))[0] == 200
            for host in (f"evil.example:{port}", f"127.0.0.1.evil.example:{port}", "10.0.0.1"):
                status, body = await _status(session, base + "/", headers={"Host": host})
                assert (status, body) == (
                    403,
                    "flowdrop-tui serve: this server answers only to localhost\n",
                )
            foreign = {"Origin": "http://evil.example"}
            assert await _ws_status(session, f"{base}/ws", headers=foreign) == 403
            other_port = {"Origin": f"http://127.0.0.1:{port + 1}"}
            assert await _ws_status(session, f"{base}/ws", headers=other_port) == 403
            assert served.ui_processes() == []
            same = {"Origin": f"http://127.0.0.1:{port}"}
            assert await _ws_status(session, f"{base}/ws", headers=same) == 101


async def test_a_token_given_on_loopback_is_required_there_too(workspace: Path) -> None:
    """Guards against --token being ignored on loopback, where a shared machine's
    other users could otherwise reach the UI."""
    with serving(workspace, "--token", TOKEN) as served:
        assert served.url == f"http://127.0.0.1:{served.port}/?token={TOKEN}"
        async with aiohttp.ClientSession() as session:
            assert (await _status(session, served.base + "/"))[0] == 401
            assert await _ws_status(session, f"{served.base}/ws") == 401
            assert (await _status(session, f"{served.base}/?token={TOKEN}"))[0] == 303
        assert served.ui_processes() == []


def test_a_second_loopback_address_needs_no_token(workspace: Path) -> None:
    """Guards against 127.0.0.2 (loopback, like all of 127/8) being taken for a
    network address."""
    if sys.platform != "linux":
        pytest.skip("only Linux answers on all of 127/8 without setup")
    with serving(workspace, "--host", "127.0.0.2") as served:
        assert served.token is None
        assert served.url == f"http://127.0.0.2:{served.port}/"


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
async def test_ctrl_c_stops_the_server_and_every_ui_it_started(
    workspace: Path, signum: int
) -> None:
    """Guards against stray UI processes (or a hang, or a traceback) after Ctrl-C
    (or a SIGTERM from a service manager) while browsers are connected."""
    with serving(workspace) as served:
        async with aiohttp.ClientSession() as session:
            sockets = [
                await session.ws_connect(f"{served.base}/ws?width=90&height=25") for _ in range(2)
            ]
            for ws in sockets:
                assert (await ws.receive(timeout=60)).type == aiohttp.WSMsgType.BINARY
            uis = served.ui_processes()
            assert len(uis) == 2
            code, err = await asyncio.to_thread(served.interrupt, signum)
            assert code == 0
            assert "Traceback" not in err
            for ws in sockets:
                await ws.close()
        assert [pid for pid in uis if alive(pid)] == []


def test_the_printed_url_parses(workspace: Path) -> None:
    """Guards against a URL a browser cannot open (an IPv6 host needs brackets)."""
    with serving(workspace, "--host", "::1") as served:
        parts = urlsplit(served.url)
        assert parts.hostname == "::1" and served.url.startswith("http://[::1]:")
        assert parse_qs(parts.query) == {}


def test_only_serve_loads_the_web_server() -> None:
    """Guards against every command paying for aiohttp and textual-serve: the CLI
    imports serve/ only for `serve`."""
    code = (
        "import sys, flowdrop_tui.cli\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in"
        " ('aiohttp', 'textual_serve', 'flowdrop_tui.serve'))\n"
        "bad += [m for m in sys.modules if m.startswith('flowdrop_tui.serve')]\n"
        "print(','.join(bad))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == ""


def test_serve_json_says_its_address_as_one_json_line(workspace: Path, cli: CLI) -> None:
    """Issue 26 item 8: `serve --json` exited 2 though every command takes --json. It
    prints one JSON line once it listens (the URL, port and token), and a refusal is the
    JSON error object."""
    process = subprocess.Popen(
        [sys.executable, "-m", "flowdrop_tui", "serve", "--port", "0", "--json"],
        cwd=workspace,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        ready = orjson.loads(line)
        assert ready["ready"] is True and ready["token"] is None, ready
        assert ready["url"] == f"http://127.0.0.1:{ready['port']}/" and ready["port"] > 0
        assert ready["workspace"] == str(workspace)
        with socket.create_connection(("127.0.0.1", ready["port"]), timeout=10):
            pass  # it listens where it said
    finally:
        process.send_signal(signal.SIGINT)
        code = process.wait(timeout=30)
        process.stdout.close()  # type: ignore[union-attr]
        process.stderr.close()  # type: ignore[union-attr]
    assert code == 0
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = cli("serve", "--port", str(port), "--json", timeout=30, check=1)
    assert "address already in use" in orjson.loads(done.stdout)["error"]["message"]
