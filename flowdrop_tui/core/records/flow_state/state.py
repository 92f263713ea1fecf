"""The write-through state mapping (SPEC §5): every key set saved before it returns.

Setting or deleting a key saves the run's whole state before the call returns:
one record in the run's state log, flushed once (``records/flow_state/state_log.py``), and
``state.json`` replaced by an atomic rename, not synced (the seed: setting a key
writes the file again), made durable when the run lets go of it. A
reader, a kill or a power cut sees the old state or the new one, never a torn
one, and a key set that has returned survives a power cut: every reader reads a
run's state with ``read_run_states``, which prefers the log while there is one.
Nothing about saving may stop a run: a value
JSON has no shape for is written as its text, one that JSON would change (NaN, a
big integer, colliding keys) as its text with a warning, one that cannot be
written at all keeps its last saved value while the other keys are saved, and a
save that fails leaves the last save standing and reports a warning.
"""

from __future__ import annotations

import json
import math
import os
import re
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import orjson

from flowdrop_tui.core.errors import UnusableStateError
from flowdrop_tui.core.files.regular import read_regular
from flowdrop_tui.core.paths import STATE
from flowdrop_tui.core.records import mirror
from flowdrop_tui.core.records.flow_state import state_log
from flowdrop_tui.core.records.flow_state.nesting import (
    MAX_DEPTH,
    VALUE_DEPTH,
    dumps_within,
    fits,
    too_deep,
)

_MISSING: Any = object()
# The fast path: no option lets a value change on the way. Integers beyond 2^53
# (which JavaScript and many JSON readers turn into floats) and keys that are not
# text raise, and go the slow way, which writes them as text with a warning.
_FAST = orjson.OPT_STRICT_INTEGER | orjson.OPT_SERIALIZE_NUMPY
_SAFE_INT = 2**53


class Unsaveable(Exception):
    """A value that cannot be written at all (its ``str`` raises, or it nests too deep)."""


def _as_text(value: Any) -> Any:
    """orjson's fallback: a value JSON has no shape for is written as its text."""
    return str(value)


def _has_non_finite(value: Any) -> bool:
    """Whether a NaN or an infinity is in ``value`` (orjson would write it as ``null``)."""
    stack = [value]
    seen: set[int] = set()
    while stack:
        item = stack.pop()
        if isinstance(item, float):
            if not math.isfinite(item):
                return True
        elif isinstance(item, Mapping | list | tuple) and id(item) not in seen:
            seen.add(id(item))
            stack.extend(item.values() if isinstance(item, Mapping) else item)
    return False


def _key_text(key: Any) -> str:
    """A mapping key as orjson's ``OPT_NON_STR_KEYS`` writes it."""
    if isinstance(key, str):
        return key
    if key is None or isinstance(key, bool):
        return "null" if key is None else "true" if key else "false"
    return str(key)


class _Plain:
    """A JSON-shaped copy of a value that nothing can change on the way (SPEC §5.3).

    What JSON has no shape for becomes its text; what JSON *can* hold but would
    change — NaN and infinities (written ``null`` otherwise), integers beyond 2^53
    (floats or text when read back), non-text keys that collide once written as
    text (one would be dropped) — becomes its text too, with a warning naming where.
    """

    def __init__(self) -> None:
        self.altered: list[tuple[str, str]] = []  # (where, what was done)

    def value(self, value: Any, where: str, seen: set[int]) -> Any:
        if value is None or isinstance(value, bool | str):
            return value
        if isinstance(value, int):
            if -_SAFE_INT <= value <= _SAFE_INT:
                return int(value)
            self.altered.append((where, "an integer beyond 2^53, written as its text"))
            return str(value)
        if isinstance(value, float):
            if math.isfinite(value):
                return float(value)
            self.altered.append((where, f"{value} (not a JSON number), written as its text"))
            return str(value)
        if isinstance(value, Mapping | list | tuple):
            if id(value) in seen:
                return str(value)  # a cycle: its text, as any value JSON has no shape for
            seen.add(id(value))
            try:
                if isinstance(value, Mapping):
                    return self.mapping(value, where, seen)
                return [self.value(v, f"{where}[{i}]", seen) for i, v in enumerate(value)]
            finally:
                seen.discard(id(value))
        return str(value)

    def mapping(self, value: Mapping[Any, Any], where: str, seen: set[int]) -> Any:
        keys = [_key_text(k) for k in value]
        if len(set(keys)) != len(keys):
            self.altered.append(
                (where, "keys that collide once written as text, written as its text")
            )
            return str(dict(value))
        return {
            text: self.value(v, f"{where}[{k!r}]", seen)
            for text, (k, v) in zip(keys, value.items(), strict=True)
        }


def encode_states(
    states: Mapping[str, Mapping[Any, Any]], last: Mapping[str, Any] | None = None
) -> tuple[bytes, list[str], list[tuple[str, str]]]:
    """Serialize a run's states: ``(bytes, altered, unsaved)`` — ``altered`` says where and
    what, in words; ``unsaved`` is ``(where, why)`` per value that cannot be written.

    A value that cannot be written at all (``unsaved``) keeps what ``last`` (the
    last good save) held for it, or is left out; every other key is written.
    """
    try:  # never deeper than the file may be read back (one limit: nesting.MAX_DEPTH)
        data = dumps_within(states, MAX_DEPTH, default=_as_text, option=_FAST)
    except (orjson.JSONEncodeError, TypeError):
        pass
    else:
        if b"null" not in data or not _has_non_finite(states):
            return data, [], []
    plain = _Plain()
    unsaved: list[tuple[str, str]] = []
    out: dict[str, dict[str, Any]] = {}
    for run_key, state in states.items():
        kept = last.get(run_key) if last is not None else None
        written: dict[str, Any] = {}
        for key, value in dict(state).items():  # a copy: a signal handler may set a key
            text = _key_text(key)
            where = f"{run_key}[{key!r}]"
            if text != key and (text in written or text in state):
                unsaved.append((where, "its key collides with another once written as text"))
                continue
            try:
                converted = plain.value(value, where, set())
                if not fits(converted, VALUE_DEPTH):
                    raise RecursionError
                written[text] = converted
            except (Exception, RecursionError) as exc:
                reason = (
                    too_deep_words()
                    if isinstance(exc, RecursionError)
                    else (f"{type(exc).__name__}: {exc}")
                )
                unsaved.append((where, reason))
                if isinstance(kept, dict) and text in kept:
                    written[text] = kept[text]
        out[run_key] = written
    altered = [f"{where} was {what}" for where, what in plain.altered]
    return orjson.dumps(out), altered, unsaved


def too_deep_words() -> str:
    return (
        f"nests more than {VALUE_DEPTH} levels, the most a state value may "
        f"({MAX_DEPTH} in state.json, the most this engine reads back)"
    )


def encode(states: Mapping[str, Mapping[Any, Any]]) -> bytes:
    """Serialize a run's states; raises ``Unsaveable`` when a value cannot be written at all."""
    data, _, unsaved = encode_states(states)
    if unsaved:
        raise Unsaveable("; ".join(f"{where} ({why})" for where, why in unsaved))
    return data


# An integer of 20 digits or more, outside a string or not: orjson reads one beyond
# 64 bits as a float (10**30 came back 1e+30). Only then is the file read again by
# Python's own parser, which keeps every integer exact (a match inside a string costs
# that second read, nothing else).
_BIG_INT = re.compile(rb"(?<![\w.])-?\d{20,}(?![\w.])")


def _exact_integers(path: Path, raw: bytes) -> Any:
    """``raw`` parsed keeping big integers exact (another tool may write them)."""
    try:
        return json.loads(raw)
    except (ValueError, RecursionError) as exc:  # beyond Python's 4300-digit limit, say
        raise UnusableStateError(
            f"{path} holds a number this engine cannot read exactly ({exc}); "
            "it was left as it is — fix it, or start fresh with --fresh"
        ) from None


def read_states(path: Path) -> dict[str, dict[str, Any]]:
    """Read a ``state.json`` as it stands; refuse (INT-15, naming the file) what cannot be
    consumed. A run's state is read with ``read_run_states`` (its log may be newer)."""
    return parse_states(_file_bytes(path), path)


def read_run_states(run_dir: Path) -> dict[str, dict[str, Any]]:
    """The run's states as its process last saved them — the one way every reader reads
    a run's state (``run_state_bytes``): a run no process holds that left its log (a
    kill, a power cut) is settled first, so its ``state.json`` is whole and current
    before anything looks, a person's edit of it honoured or refused (INT-15)."""
    return parse_states(run_state_bytes(run_dir), run_dir / STATE)


def run_state_bytes(run_dir: Path) -> bytes:
    """The run's state as bytes: a dead run's log settled into ``state.json`` (or its
    edit honoured), then the log while one stands (a live run), else ``state.json``.
    ``UnusableStateError``: a ``state.json`` that cannot be read or is not JSON."""
    if state_log.settle(run_dir) != state_log.Settled.REFUSED:
        data = state_log.state_bytes(run_dir)
        if data is not None:
            return data
    return _file_bytes(run_dir / STATE)


def _file_bytes(path: Path) -> bytes:
    try:
        return read_regular(path, None)  # a FIFO or a device: refused, never waited on
    except FileNotFoundError:
        raise UnusableStateError(
            f"{path} is missing: the run's state cannot be read; "
            "start fresh with --fresh, or name another run with --from"
        ) from None
    except OSError as exc:
        raise UnusableStateError(f"{path} cannot be read: {exc.strerror or exc}") from exc


def parse_states(raw: bytes, path: Path) -> dict[str, dict[str, Any]]:
    """A run's states from their bytes; refused (INT-15, naming ``path``) when unusable."""
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
    if _BIG_INT.search(raw):
        data = _exact_integers(path, raw)
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
    """One run's ``state.json``: the states of every key the run writes, saved together.

    Written only by the process that holds the run: a flow that forks (no exec)
    has a child holding this same object, and that child's saves are skipped —
    otherwise its exit would write the fork-time state back over the run's.
    """

    def __init__(self, path: Path, on_warning: Callable[[str], None] | None = None) -> None:
        self.path = path
        self.on_warning: Callable[[str], None] = on_warning or (lambda message: None)
        # Durable in the run's state log, published to state.json (records/flow_state/state_log.py);
        # the run sets ``keeper.before_durable`` (its events flushed before each save).
        self.keeper = state_log.Keeper(path)
        self._states: dict[str, State] = {}
        self._lock = threading.RLock()
        self._owner = os.getpid()
        self._failing: str | None = None
        self._unpublished: str | None = None  # why state.json lags its log, as last said
        self._saving = False
        self._dirty = False
        self._last: bytes | None = None  # the last good save, for a value that cannot be written
        self._encoded: bytes | None = None  # what the last save encoded, written or not
        self._altered_told: set[str] = set()
        # SPEC §5.3: how many saves left each value out in this run, warned of twice
        # (a resumed run counts on; docs/decisions.md, "What a newcomer tripped on")
        self.refused: dict[str, int] = {}
        self._closed: Callable[[str], None] | None = None  # set by close(): saves refused
        self._late_told = False

    def state(self, key: str, initial: Mapping[str, Any] | None = None) -> State:
        """The mapping for ``key``, created with ``initial`` (and saved) the first time."""
        with self._lock:
            existing = self._states.get(key)
            if existing is not None:
                return existing
            state = State(self, initial or {}, key)
            self._states[key] = state
            self.save()
            return state

    def adopt(self, states: Mapping[str, Mapping[str, Any]]) -> None:
        """Hold ``states`` as read from disk (a resumed run), without writing."""
        with self._lock:
            for key, value in states.items():
                self._states[key] = State(self, value, key)

    def refuse_deep(self, key: str, items: Mapping[str, Any]) -> set[str]:
        """The names among ``items`` whose value nests too deep to be read back (SPEC
        §5.3): refused at the key set that made them — the name keeps its last value,
        the others are set — with one warning each."""
        refused = {name for name, value in items.items() if not fits(value, VALUE_DEPTH)}
        for name in sorted(refused):
            self.on_warning(
                f"state value {key}[{name!r}] {too_deep_words()}: it was not set; it keeps "
                "its last value and every other key was saved"
            )
        return refused

    def snapshot(self) -> dict[str, dict[str, Any]]:
        with self._lock:
            return {key: dict(value) for key, value in self._states.items()}

    def save(self) -> bool:
        """Write every key's state; on failure keep the last save and warn.

        A save that re-enters (a key set from a signal handler while this thread is
        saving) only marks the state dirty: the save in flight writes again when it
        is done, so the file never goes backwards and nothing waits on itself.
        """
        if os.getpid() != self._owner:
            return False  # a forked child of the flow: only the run's process writes
        if self._closed is not None:
            return self._refuse_after_close()
        with self._lock:
            if self._saving:
                self._dirty = True
                return True
            self._saving = True
            try:
                saved = self._save_once()
                if self._dirty:
                    # Once more for what re-entered; a handler firing faster than a save
                    # takes leaves it dirty for the next save (a key set, a round's end,
                    # the run's end) rather than never returning.
                    saved = self._save_once()
                return saved
            finally:
                self._saving = False

    def _save_once(self) -> bool:
        self._dirty = False
        try:
            last = None
            data, altered, unsaved = encode_states(self._states)
            if unsaved:  # SPEC §5.3: one bad value never freezes the rest
                last = self._last_good()
                data, altered, unsaved = encode_states(self._states, last)
            self._encoded = data
            remote = mirror.current()
            # Remote mode: PostgreSQL's commit is the durable copy (its state.json is the
            # record's, replaced at every key set); the working copy here is the log's
            # record, unsynced, and no rename of state.json: its journal entry would ride
            # PostgreSQL's WAL flush on the same disk (a remote key set 1.3x a local one
            # without it, 2x with it; docs/decisions.md).
            self.keeper.keep(data, mirrored=remote is not None and remote.keeps_durably)
            if remote is not None:
                remote.wrote(self.path, data)
        except Exception as exc:  # SPEC §5.3: nothing about keeping state may stop a run
            message = f"state not saved ({type(exc).__name__}: {exc}); the last save stands"
            if message != self._failing:
                self._failing = message
                self.on_warning(message)
            return False
        self._last = data
        for where in altered:
            if where not in self._altered_told:  # the value is saved: say so once
                self._altered_told.add(where)
                self.on_warning(f"state value {where} (SPEC §5.3: never altered silently)")
        for where, why in unsaved:  # not saved: said twice, then counted
            self._refused_once(where, why)
        if self._failing is not None:
            self._failing = None
            self.on_warning("state saved again after earlier failures")
        self._tell_published()
        return not unsaved

    def _tell_published(self) -> None:
        """Say once that ``state.json`` cannot be replaced (each save is kept in the run's
        state log all the same, and every reader reads it), and when it can again."""
        trouble = self.keeper.publish_trouble
        if trouble == self._unpublished:
            return
        if trouble is not None:
            self.on_warning(
                f"state.json not replaced ({trouble}); each save is kept in "
                "state.log, which every reader reads, and state.json follows when it can"
            )
        else:
            self.on_warning("state.json replaced again after earlier failures")
        self._unpublished = trouble

    def _refused_once(self, where: str, why: str) -> None:
        """A save that left ``where`` out: the first says why, the second that it will not
        be said again; the rest are counted (``refused``: the run's end records it)."""
        count = self.refused.get(where, 0) + 1
        self.refused[where] = count
        if count == 1:
            self.on_warning(
                f"state value {where} ({why}) cannot be written; it keeps its last saved "
                "value and every other key was saved"
            )
        elif count == 2:
            self.on_warning(
                f"state value {where} still cannot be written ({why}); this is not said "
                "again in this run — the run's end counts the saves that left it out "
                "(flowdrop-tui show RUN)"
            )

    def _last_good(self) -> dict[str, Any] | None:
        raw = self._last
        try:
            if raw is None:
                raw = run_state_bytes(self.path.parent)  # a resumed run: what it last saved
            data = orjson.loads(raw)
        except (OSError, UnusableStateError, orjson.JSONDecodeError):
            return None
        return data if isinstance(data, dict) else None

    def encoded(self) -> bytes:
        """The state as the last save encoded it — written, or not when the disk refused
        (SPEC §20 digests it at each round's end: a loop whose state moves is moving,
        whether or not it can be kept); before any save, what the file holds."""
        if self._encoded is not None:
            return self._encoded
        try:
            return run_state_bytes(self.path.parent)
        except (OSError, UnusableStateError):
            return b""

    def close(self, on_late: Callable[[str], None] | None = None) -> None:
        """The run's process is done writing: ``state.json`` made durable, the log gone;
        every later save is refused (a flow's leftover thread or ``atexit`` hook had
        rewritten an ended run's ``state.json`` after its end), said once through
        ``on_late`` (never into the record: nothing follows its end)."""
        if os.getpid() != self._owner:
            return
        with self._lock:
            self._closed = on_late or (lambda message: None)
            trouble = self.keeper.close()
        if trouble is not None:
            self.on_warning(trouble)

    def _refuse_after_close(self) -> bool:
        if not self._late_told and self._closed is not None:
            self._late_told = True
            self._closed(
                f"state not saved: the run has ended, and {self.path} is never written after "
                "its end (a thread or an atexit hook of the flow set a key); said once"
            )
        return False


class State(dict[str, Any]):
    """A dict that saves its run's ``state.json`` whenever a key is set or deleted.

    Every mutating method is overridden: ``dict``'s own C implementations would
    otherwise bypass ``__setitem__`` and skip the save. Writing *inside* a value
    cannot be seen here; the run saves again at each round end and at its end.
    """

    def __init__(self, store: StateFile, initial: Mapping[str, Any], key: str = "") -> None:
        super().__init__(initial)
        self._store = store
        self._key = key

    def _set(self, items: dict[str, Any]) -> None:
        """Set ``items`` and save; a value nested too deep is refused here (SPEC §5.3)."""
        for name in self._store.refuse_deep(self._key, items):
            del items[name]
        super().update(items)
        self._save()

    def __reduce__(self) -> Any:
        return (dict, (dict(self),))

    def _save(self) -> None:
        self._store.save()

    def __setitem__(self, key: str, value: Any) -> None:
        if isinstance(value, (dict, list, tuple)):  # may nest too deep: checked first
            self._set({key: value})
        else:  # a scalar (what a loop sets most) nests nowhere: set and saved at once
            super().__setitem__(key, value)
            self._save()

    def __delitem__(self, key: str) -> None:
        super().__delitem__(key)
        self._save()

    def __ior__(self, other: Any) -> State:  # type: ignore[override,misc]
        self._set(dict(other))
        return self

    def update(self, *args: Any, **kwargs: Any) -> None:
        self._set(dict(*args, **kwargs))

    def setdefault(self, key: str, default: Any = None) -> Any:
        if key in self:
            return self[key]
        self._set({key: default})
        return self.get(key)

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
