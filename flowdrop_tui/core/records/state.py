"""The write-through state mapping (SPEC §5): every key set saved before it returns.

Setting or deleting a key writes the run's whole ``state.json`` again before
the call returns: the new bytes synced to disk, then published in one atomic
step (``files.atomic.AtomicFile``). A reader, a kill or a power cut sees the old
file or the new one, never a torn one. Nothing about saving may stop a run: a value JSON has no
shape for is written as its text, and a save that fails leaves the last save
standing and reports a warning.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import orjson

from flowdrop_tui.core.errors import UnusableStateError
from flowdrop_tui.core.files.atomic import AtomicFile
from flowdrop_tui.core.records.nesting import MAX_DEPTH, too_deep

_MISSING: Any = object()
_OPTS = orjson.OPT_NON_STR_KEYS | orjson.OPT_SERIALIZE_NUMPY


def _as_text(value: Any) -> Any:
    """orjson's fallback: a value JSON has no shape for is written as its text."""
    return str(value)


def _plain(value: Any, seen: set[int]) -> Any:
    """A JSON-shaped copy of ``value``; anything else becomes ``str(value)``.

    Only used when orjson refuses the fast path (integers over 64 bits, cycles,
    nesting deeper than orjson allows); ``str`` may raise, which the caller reports.
    """
    if value is None or isinstance(value, bool | str):
        return value
    if isinstance(value, int):
        return value if -(2**63) <= value < 2**64 else str(value)
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping | list | tuple):
        if id(value) in seen:
            return str(value)
        seen.add(id(value))
        try:
            if isinstance(value, Mapping):
                return {str(k): _plain(v, seen) for k, v in value.items()}
            return [_plain(v, seen) for v in value]
        finally:
            seen.discard(id(value))
    return str(value)


def encode(states: Mapping[str, Any]) -> bytes:
    """Serialize a run's states; raises only when a value cannot be written at all."""
    try:
        return orjson.dumps(states, default=_as_text, option=_OPTS)
    except (orjson.JSONEncodeError, TypeError):
        pass
    try:
        return orjson.dumps(_plain(states, set()), default=_as_text, option=_OPTS)
    except RecursionError as exc:
        raise ValueError("the state is nested too deeply to be written") from exc


def read_states(path: Path) -> dict[str, dict[str, Any]]:
    """Read a run's ``state.json``; refuse (INT-15, naming the file) what cannot be consumed."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise UnusableStateError(
            f"{path} is missing: the run's state cannot be read; "
            "start fresh with --fresh, or name another run with --from"
        ) from None
    except OSError as exc:
        raise UnusableStateError(f"{path} cannot be read: {exc.strerror or exc}") from exc
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise UnusableStateError(
            f"{path} is not valid JSON ({exc}); it was left as it is — fix it, "
            "or start fresh with --fresh"
        ) from None
    if too_deep(data, raw):
        raise UnusableStateError(
            f"{path} nests more than {MAX_DEPTH} levels deep, the most this engine reads; "
            "it was left as it is — fix it, or start fresh with --fresh"
        )
    if not isinstance(data, dict):
        raise UnusableStateError(
            f"{path} holds {type(data).__name__}, not an object of states by key; "
            "it was left as it is — fix it, or start fresh with --fresh"
        )
    for key, value in data.items():
        if not isinstance(value, dict):
            raise UnusableStateError(
                f"{path}: the state under {key!r} is {type(value).__name__}, not an object; "
                "it was left as it is — fix it, or start fresh with --fresh"
            )
    return data


class StateFile:
    """One run's ``state.json``: the states of every key the run writes, saved together."""

    def __init__(self, path: Path, on_warning: Callable[[str], None] | None = None) -> None:
        self.path = path
        self._file = AtomicFile(path)
        self.on_warning: Callable[[str], None] = on_warning or (lambda message: None)
        self._states: dict[str, State] = {}
        self._lock = threading.RLock()
        self._failing: str | None = None

    def state(self, key: str, initial: Mapping[str, Any] | None = None) -> State:
        """The mapping for ``key``, created with ``initial`` (and saved) the first time."""
        with self._lock:
            existing = self._states.get(key)
            if existing is not None:
                return existing
            state = State(self, initial or {})
            self._states[key] = state
            self.save()
            return state

    def adopt(self, states: Mapping[str, Mapping[str, Any]]) -> None:
        """Hold ``states`` as read from disk (a resumed run), without writing."""
        with self._lock:
            for key, value in states.items():
                self._states[key] = State(self, value)

    def snapshot(self) -> dict[str, dict[str, Any]]:
        with self._lock:
            return {key: dict(value) for key, value in self._states.items()}

    def save(self) -> bool:
        """Write every key's state; on failure keep the last save and warn once per cause."""
        with self._lock:
            try:
                data = encode(self._states)
                self._file.replace(data)
            except Exception as exc:  # SPEC §5.3: nothing about keeping state may stop a run
                message = f"state not saved ({type(exc).__name__}: {exc}); the last save stands"
                if message != self._failing:
                    self._failing = message
                    self.on_warning(message)
                return False
            if self._failing is not None:
                self._failing = None
                self.on_warning("state saved again after earlier failures")
            return True

    def close(self) -> None:
        """The run is done writing: leave only ``state.json`` in its folder."""
        with self._lock:
            self._file.discard_spares()


class State(dict[str, Any]):
    """A dict that saves its run's ``state.json`` whenever a key is set or deleted.

    Every mutating method is overridden: ``dict``'s own C implementations would
    otherwise bypass ``__setitem__`` and skip the save. Writing *inside* a value
    cannot be seen here; the run saves again at each round end and at its end.
    """

    def __init__(self, store: StateFile, initial: Mapping[str, Any]) -> None:
        super().__init__(initial)
        self._store = store

    def __reduce__(self) -> Any:
        return (dict, (dict(self),))

    def _save(self) -> None:
        self._store.save()

    def __setitem__(self, key: str, value: Any) -> None:
        super().__setitem__(key, value)
        self._save()

    def __delitem__(self, key: str) -> None:
        super().__delitem__(key)
        self._save()

    def __ior__(self, other: Any) -> State:  # type: ignore[override,misc]
        super().update(other)
        self._save()
        return self

    def update(self, *args: Any, **kwargs: Any) -> None:
        super().update(*args, **kwargs)
        self._save()

    def setdefault(self, key: str, default: Any = None) -> Any:
        if key in self:
            return self[key]
        super().__setitem__(key, default)
        self._save()
        return default

    def pop(self, key: str, default: Any = _MISSING) -> Any:
        if key not in self:
            if default is _MISSING:
                raise KeyError(key)
            return default
        value = super().pop(key)
        self._save()
        return value

    def popitem(self) -> tuple[str, Any]:
        item = super().popitem()
        self._save()
        return item

    def clear(self) -> None:
        super().clear()
        self._save()

    def copy(self) -> dict[str, Any]:
        return dict(self)

    def __repr__(self) -> str:
        return f"State({dict.__repr__(self)})"
