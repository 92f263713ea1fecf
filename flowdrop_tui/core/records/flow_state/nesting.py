"""How deep a JSON value nests, and what this engine will read.

orjson writes at most 254 levels and reads 1,024, and Python's own recursion
runs out somewhere in between, so a file nested a few hundred levels deep parsed
fine and then failed as a traceback when it was written out again (a ``show``,
a snapshot, the next run's ``state.json``). Files are checked when read instead:
anything deeper than ``MAX_DEPTH`` is refused naming the file, leaving every
wrapper the engine adds (a snapshot, ``show --json``, an event) room below the
writer's limit.
"""

from __future__ import annotations

from typing import Any

import orjson

MAX_DEPTH = 200  # a file's top level counts as 1; orjson writes up to 254
WRITER_DEPTH = 254  # the most orjson writes ("Recursion limit reached" past it)
# A state value sits two levels down in state.json (``{key: {name: value}}``): the most
# it may nest, so that what is written is always read back (one limit, both ways).
VALUE_DEPTH = MAX_DEPTH - 2
_CLIPPED = "<nested more than {} levels: not shown>"
_PROBE = orjson.OPT_NON_STR_KEYS | orjson.OPT_SERIALIZE_NUMPY


def _no_shape(value: Any) -> Any:
    return None  # (a value JSON has no shape for is written as its text: no deeper)


# Nests of empty lists, by depth, ready for ``dumps_within``: (the outermost, the
# innermost). Building one is a Python loop that cost more than the write it wraps (5 µs
# of a key set); each is taken by one call at a time (a signal handler's call, or another
# thread's, takes another or builds its own).
_NESTS: dict[int, list[tuple[list[Any], list[Any]]]] = {}


def _nest(extra: int) -> tuple[list[Any], list[Any]]:
    innermost: list[Any] = []
    outermost = innermost
    for _ in range(extra - 1):
        outermost = [outermost]
    return outermost, innermost


def dumps_within(value: Any, levels: int, default: Any = _no_shape, option: int = 0) -> bytes:
    """``orjson.dumps(value)``, raising ``orjson.JSONEncodeError`` when ``value`` nests
    more than ``levels`` levels — measured by orjson itself, at C speed: the value is
    written inside ``WRITER_DEPTH - levels`` lists, which are then cut off again."""
    extra = WRITER_DEPTH - levels
    free = _NESTS.setdefault(extra, [])
    try:
        outermost, innermost = free.pop()
    except IndexError:
        outermost, innermost = _nest(extra)
    innermost.append(value)
    try:
        raw = orjson.dumps(outermost, default=default, option=option)
    finally:
        innermost.clear()
        free.append((outermost, innermost))
    return raw[extra : len(raw) - extra]


def fits(value: Any, levels: int) -> bool:
    """Whether ``value`` nests at most ``levels`` levels (a cycle is not depth: it is
    written as its text). Cheap for a scalar; one C-speed write for a container."""
    if not isinstance(value, (dict, list, tuple)):  # a tuple: twice as fast as a union
        return True
    try:
        dumps_within(value, levels, option=_PROBE)
        return True
    except orjson.JSONEncodeError as exc:
        if "Recursion limit" not in str(exc):
            return True  # another failure: not this check's to judge
    # Too deep, or a cycle (orjson says the same of both): measured with cycles cut.
    return _depth_no_cycles(value, levels + 1) <= levels


def _depth_no_cycles(value: Any, stop: int) -> int:
    """``depth_of``, not counting a container again inside itself; up to ``stop``."""
    deepest = 0
    pending: list[tuple[Any, int, frozenset[int]]] = [(value, 1, frozenset())]
    while pending:
        item, level, above = pending.pop()
        if id(item) in above:
            continue
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list | tuple):
            children = item
        else:
            continue
        deepest = max(deepest, level)
        if deepest >= stop:
            return deepest
        path = above | {id(item)}
        pending.extend((child, level + 1, path) for child in children)
    return deepest


def depth_of(value: Any, stop: int = MAX_DEPTH + 1) -> int:
    """Levels of lists and objects in ``value`` (a scalar is 0), counted up to ``stop``.

    Iterative, so a value of any depth is measured without recursion."""
    deepest = 0
    pending: list[tuple[Any, int]] = [(value, 1)]
    while pending:
        item, level = pending.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list | tuple):
            children = item
        else:
            continue
        deepest = max(deepest, level)
        if deepest >= stop:
            return deepest
        pending.extend((child, level + 1) for child in children)
    return deepest


def too_deep(value: Any, raw: bytes | None = None) -> bool:
    """Whether ``value`` nests more than ``MAX_DEPTH`` levels.

    ``raw``, the bytes it was parsed from, rules most values out at C speed: a value
    cannot nest deeper than it has brackets."""
    if raw is not None and raw.count(b"[") + raw.count(b"{") <= MAX_DEPTH:
        return False
    return depth_of(value) > MAX_DEPTH


def clip(value: Any, limit: int = MAX_DEPTH) -> Any:
    """``value`` with whatever nests below ``limit`` levels replaced by a short text.

    For output only (a record forged deeper than any file this engine writes)."""
    if limit <= 0:
        return _CLIPPED.format(MAX_DEPTH) if isinstance(value, dict | list | tuple) else value
    if isinstance(value, dict):
        return {k: clip(v, limit - 1) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [clip(v, limit - 1) for v in value]
    return value
