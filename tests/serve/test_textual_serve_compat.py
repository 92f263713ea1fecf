"""textual-serve's private names stay in ``serve/textual_serve_compat.py``, and still
exist in the pinned textual-serve: an upgrade that renames one fails here, by name,
instead of in a browser."""

from __future__ import annotations

import asyncio
import inspect
import re
from pathlib import Path

from textual_serve.app_service import AppService
from textual_serve.download_manager import DownloadManager
from textual_serve.server import Server

import flowdrop_tui.serve
from flowdrop_tui.serve import textual_serve_compat as compat

SERVE = Path(flowdrop_tui.serve.__file__).parent
COMPAT = SERVE / "textual_serve_compat.py"
PRIVATE_CALL = re.compile(r"\.(_[A-Za-z]\w*)\(")


def _called(function: object) -> tuple[type, str]:
    """The textual-serve class and private method a compat function calls."""
    source = inspect.getsource(function)  # type: ignore[arg-type]
    (found,) = re.findall(r"\b(AppService|Server)\.(_[A-Za-z]\w*)\(", source)
    return {"AppService": AppService, "Server": Server}[found[0]], found[1]


def test_every_private_name_the_compat_module_uses_still_exists() -> None:
    """Guards a textual-serve upgrade: each function here calls a method textual-serve
    still defines, taking the parameters given; the hook ``UiProcess`` replaces and the
    attributes it sets are still textual-serve's."""
    calls = {
        compat.base_environment: ("width", "height"),
        compat.base_app: (),
        compat.relay_messages: ("websocket", "app_service"),
    }
    for function, parameters in calls.items():
        owner, name = _called(function)
        method = owner.__dict__.get(name)
        assert callable(method), f"textual-serve's {owner.__name__}.{name} is gone"
        taken = list(inspect.signature(method).parameters)[1:]
        assert taken[: len(parameters)] == list(parameters), (owner.__name__, name, taken)
    for owner, names in compat.HOOKS.items():
        for name in names:
            assert callable(owner.__dict__.get(name)), f"{owner.__name__}.{name} is gone"

    async def made() -> AppService:
        async def nothing(*_: object) -> None:
            return None

        return AppService(
            "true",
            write_bytes=nothing,
            write_str=nothing,
            close=nothing,
            download_manager=DownloadManager(),
        )

    service = asyncio.run(made())
    for attribute in compat.ATTRIBUTES:
        assert hasattr(service, attribute), f"AppService no longer sets {attribute}"


def test_the_environment_is_textual_serves_own_without_the_token() -> None:
    """Guards the compat call in use: the UI process gets textual-serve's environment
    (its size) and never the serve token."""
    import os

    from flowdrop_tui.serve.server import TOKEN_ENV, UiProcess

    async def environment() -> dict[str, str]:
        async def nothing(*_: object) -> None:
            return None

        ui = UiProcess(
            ["true"],
            SERVE,
            write_bytes=nothing,
            write_str=nothing,
            close=nothing,
            download_manager=DownloadManager(),
        )
        return ui.environment(101, 33)

    os.environ[TOKEN_ENV] = "secret"
    try:
        found = asyncio.run(environment())
    finally:
        del os.environ[TOKEN_ENV]
    assert (found["COLUMNS"], found["ROWS"]) == ("101", "33")
    assert TOKEN_ENV not in found


def test_no_other_serve_module_calls_a_textual_serve_private_name() -> None:
    """Guards against ``self._make_app()`` creeping back into ``server.py``: a private
    call outside the compat module must be to a name ``serve/`` defines itself."""
    texts = {p: p.read_text(encoding="utf-8") for p in sorted(SERVE.rglob("*.py")) if p != COMPAT}
    own = set().union(*(re.findall(r"\bdef (_[A-Za-z]\w*)", t) for t in texts.values()))
    theirs = {name for cls in (AppService, Server) for name in vars(cls) if name.startswith("_")}
    assert {"_make_app", "_process_messages", "_build_environment"} <= theirs
    found = [
        f"{path.name}:{number}: {line.strip()}"
        for path, text in texts.items()
        for number, line in enumerate(text.splitlines(), 1)
        for name in PRIVATE_CALL.findall(line)
        if name in theirs and name not in own
    ]
    assert found == [], "textual-serve private calls outside the compat module:\n" + "\n".join(
        found
    )
