"""Who may reach a served UI: the bind address, the token, and the checks on every request.

Whoever reaches the page can start and stop runs in the workspace, so nothing of
the app (page, websocket, static files, downloads) is answered before these
checks pass. The token is compared in constant time; a wrong or missing one gets
a 401/403 with one line of text and nothing else.
"""

from __future__ import annotations

import hmac
import ipaddress
import os
import re
import secrets
import socket
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from urllib.parse import urlsplit

from aiohttp import web

from flowdrop_tui.core.errors import UsageError

TOKEN_QUERY = "token"
TOKEN_ENV = "FLOWDROP_SERVE_TOKEN"  # the token, when --token is not given
MIN_TOKEN_LENGTH = 16
# URL-safe as it is, so the printed URL needs no quoting and a cookie can hold it.
_TOKEN_CHARS = re.compile(r"[A-Za-z0-9._~-]+")
_LOOPBACK_NAMES = {"localhost", "localhost.", "ip6-localhost", "ip6-loopback"}

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def is_loopback_address(address: str) -> bool:
    """127.0.0.0/8, ::1 and IPv4-mapped 127.x are loopback; 0.0.0.0 and :: are every
    interface, so they are not."""
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_loopback


def bind_is_loopback(host: str) -> bool:
    """Whether every address ``host`` binds to is a loopback one.

    A name is resolved the way the server will resolve it; a name that resolves to
    anything but loopback (or does not resolve) counts as reachable from elsewhere.
    """
    if not host:
        return False  # aiohttp binds every interface for an empty host
    try:
        ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        pass
    else:
        return is_loopback_address(host)
    try:
        infos = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
    except OSError:
        return False
    return bool(infos) and all(is_loopback_address(str(info[4][0])) for info in infos)


def new_token() -> str:
    return secrets.token_urlsafe(32)


def check_token(token: str) -> str:
    """A token given with ``--token``: long enough to guess at no better than chance,
    and spelled so it travels in a URL and a cookie untouched."""
    if len(token) < MIN_TOKEN_LENGTH or not _TOKEN_CHARS.fullmatch(token):
        raise UsageError(
            f"--token must be at least {MIN_TOKEN_LENGTH} characters of A-Z a-z 0-9 . _ ~ -"
            " (leave it out and serve makes one)"
        )
    return token


def token_for(host: str, given: str | None) -> str | None:
    """The token a server on ``host`` requires: ``--token`` (checked), else
    ``$FLOWDROP_SERVE_TOKEN``, else one made up unless ``host`` is loopback —
    whoever reaches any other address could start and stop runs."""
    token = given if given is not None else os.environ.get(TOKEN_ENV) or None
    if token is not None:
        return check_token(token)
    return None if bind_is_loopback(host) else new_token()


def _host_of(netloc: str) -> str:
    """The host part of a Host header or an Origin's netloc, brackets and port removed."""
    try:
        host = urlsplit(f"//{netloc}").hostname
    except ValueError:
        return ""
    return host or ""


def _is_loopback_host_header(netloc: str) -> bool:
    host = _host_of(netloc).lower()
    return host in _LOOPBACK_NAMES or is_loopback_address(host)


def _refuse(status: type[web.HTTPException], why: str) -> web.HTTPException:
    return status(text=f"flowdrop-tui serve: {why}\n", headers={"Cache-Control": "no-store"})


@dataclass
class Access:
    """The rules one server applies. ``token`` None means a loopback bind without one;
    ``port`` is the one bound (it names the cookie)."""

    token: str | None
    port: int

    @property
    def cookie(self) -> str:
        # Cookies are not kept apart by port: two servers on one host need two names.
        return f"flowdrop-serve-{self.port}"

    def _token_matches(self, given: str | None) -> bool:
        if self.token is None or given is None:
            return False
        return hmac.compare_digest(given.encode("utf-8"), self.token.encode("utf-8"))

    @web.middleware
    async def middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        origin = request.headers.get("Origin")
        if self.token is None:
            # Loopback without a token: a page from another site must not drive the UI
            # (a websocket is not held back by CORS), nor a name that rebinds to 127.0.0.1.
            # request.host stands in this machine's name for a missing Host header (an
            # HTTP/1.0 request): only a Host the client sent is looked at.
            sent = request.headers.get("Host")
            if sent is None or not _is_loopback_host_header(sent):
                raise _refuse(web.HTTPForbidden, "this server answers only to localhost")
            if origin is not None and urlsplit(origin).netloc != request.host:
                raise _refuse(web.HTTPForbidden, "requests from other sites are refused")
            return await handler(request)

        from_query = request.query.get(TOKEN_QUERY)
        if from_query is not None:
            if not self._token_matches(from_query):
                raise _refuse(web.HTTPForbidden, "wrong token")
            if request.method == "GET" and request.path == "/":
                # The token moves to a cookie and out of the address bar and history.
                query = {k: v for k, v in request.query.items() if k != TOKEN_QUERY}
                response = web.HTTPSeeOther(request.rel_url.with_query(query).human_repr())
                response.set_cookie(
                    self.cookie, self.token, httponly=True, samesite="Strict", path="/"
                )
                raise response
            return await handler(request)
        from_cookie = request.cookies.get(self.cookie)
        if from_cookie is None:
            raise _refuse(
                web.HTTPUnauthorized, "this address needs the token: open the URL serve printed"
            )
        if not self._token_matches(from_cookie):
            raise _refuse(web.HTTPForbidden, "wrong token")
        if origin is not None and urlsplit(origin).netloc != request.host:
            raise _refuse(web.HTTPForbidden, "requests from other sites are refused")
        return await handler(request)
