"""Backends by name: built in, registered in-process, or installed as entry points."""

from __future__ import annotations

import importlib
from importlib.metadata import entry_points
from typing import Any

from flowdrop_tui.core.errors import BackendUnavailableError, FlowdropError
from flowdrop_tui.core.sessions.base import Backend

ENTRY_POINT_GROUP = "flowdrop_tui.backends"

_BUILTIN = {
    "command": ("flowdrop_tui.core.sessions.command", "CommandBackend"),
    "claude": ("flowdrop_tui.core.sessions.claude", "ClaudeBackend"),
    "codex": ("flowdrop_tui.core.sessions.codex", "CodexBackend"),
}
_registered: dict[str, Backend] = {}


def register(backend: Backend) -> None:
    """Make ``backend`` available by its name in this process (tests, embedding)."""
    _registered[backend.name] = backend


def _instantiate(obj: Any, where: str) -> Backend:
    if isinstance(obj, type) or (callable(obj) and not hasattr(obj, "run")):
        obj = obj()
    if not isinstance(obj, Backend):
        raise BackendUnavailableError(
            f"{where} is not a session backend (it needs a `name` and a `run` method)"
        )
    return obj


def available() -> list[str]:
    """Every backend name: built in, registered here, and installed as entry points."""
    names = set(_BUILTIN) | set(_registered)
    names.update(ep.name for ep in entry_points(group=ENTRY_POINT_GROUP))
    return sorted(names)


def get_backend(name: str) -> Backend:
    """The backend called ``name``: registered, built in, or from an installed entry point."""
    if name in _registered:
        return _registered[name]
    if name in _BUILTIN:
        module, attr = _BUILTIN[name]
        backend = _instantiate(getattr(importlib.import_module(module), attr), name)
        _registered[name] = backend
        return backend
    for ep in entry_points(group=ENTRY_POINT_GROUP, name=name):
        where = f"entry point {ep.name} = {ep.value}"
        try:
            loaded = ep.load()
        except Exception as exc:
            raise BackendUnavailableError(
                f"session backend {name!r} could not be loaded ({where}): {exc}"
            ) from exc
        backend = _instantiate(loaded, where)
        _registered[name] = backend
        return backend
    raise FlowdropError(f"unknown session backend {name!r} (available: {', '.join(available())})")
