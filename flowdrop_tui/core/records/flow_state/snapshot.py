"""Snapshots in the FlowDrop shape, and the two pure rules over them (SG-12, INT-14).

``seed_next_turn`` and ``ensure_resumable`` are public API: they take and give
plain dicts so anyone holding snapshots in another store can apply the same rules.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import orjson

from flowdrop_tui.core.errors import NotFoundError, TerminalSnapshotError, UnusableStateError
from flowdrop_tui.core.records.flow_state.nesting import MAX_DEPTH, too_deep

TERMINAL_STATUSES = frozenset({"completed", "failed", "cancelled"})
ENDED_STATUSES = TERMINAL_STATUSES | {"interrupted"}
KNOWN_STATUSES = ENDED_STATUSES | {"paused", None}


def _status_in(snapshot: dict[str, Any], statuses: frozenset[str]) -> bool:
    # A snapshot comes from a file or another store: a list or object as its
    # status is no status of ours (and would not even hash for a set lookup).
    status = snapshot.get("status")
    return isinstance(status, str) and status in statuses


def seed_next_turn(snapshot: dict[str, Any]) -> dict[str, Any]:
    """SG-12: the state that seeds a new turn from ``snapshot``; the input is not modified.

    A run that *ended* (any outcome, interrupted included) keeps what the thread
    accumulated — ``data``, ``metadata``, ``messages``, ``threadId`` and any other
    field — and clears what the finished run owned: its outcome and its execution
    position. Anything else (a paused run) is restored untouched, as a copy.
    """
    seeded = copy.deepcopy(snapshot)
    if _status_in(snapshot, ENDED_STATUSES):
        # SG-12 clause 2: the new turn reports its own outcome and starts its loops afresh.
        seeded.update(
            status=None,
            isComplete=False,
            error=None,
            currentNodeId="",
            iterationCount=0,
            iterator=None,
        )
    # SG-12 clause 3: a paused run is restored untouched, execution position included.
    return seeded


def ensure_resumable(snapshot: dict[str, Any], name: str) -> None:
    """INT-14: refuse a snapshot whose status is terminal, naming it and its status.

    The outcome is read from ``status`` only, never derived from ``isComplete``.
    """
    status = snapshot.get("status")
    if _status_in(snapshot, TERMINAL_STATUSES):
        raise TerminalSnapshotError(
            f"{name} is {status}: a finished run is not resumed (INT-14); "
            "to carry its state into a new run, pick it up with --from or a plain run"
        )


def check_shape(snapshot: Any, name: str) -> dict[str, Any]:
    """Refuse (INT-15, naming the file) a snapshot this engine cannot consume."""

    def refuse(why: str) -> UnusableStateError:
        return UnusableStateError(f"{name} is not a usable snapshot: {why}; it was left as it is")

    if not isinstance(snapshot, dict):
        raise refuse(f"it holds {type(snapshot).__name__}, not an object")
    if too_deep(snapshot):
        raise refuse(f"it nests more than {MAX_DEPTH} levels deep, the most this engine reads")
    if "status" not in snapshot:
        raise refuse('it has no "status" field')
    status = snapshot["status"]
    if not (status is None or (isinstance(status, str) and status in KNOWN_STATUSES)):
        raise refuse(
            f'its status {snapshot["status"]!r} is none of null, "paused", "interrupted", '
            '"completed", "failed", "cancelled"'
        )
    expected = {"data": dict, "metadata": dict, "messages": list}
    for key, kind in expected.items():
        if key in snapshot and not isinstance(snapshot[key], kind):
            raise refuse(f'"{key}" is {type(snapshot[key]).__name__}, not {kind.__name__}')
    count = snapshot.get("iterationCount", 0)
    if not isinstance(count, int) or isinstance(count, bool) or count < 0:
        raise refuse('"iterationCount" is not a whole number')
    iterator = snapshot.get("iterator")
    if iterator is not None and (
        not isinstance(iterator, int) or isinstance(iterator, bool) or iterator < 0
    ):
        raise refuse('"iterator" is neither null nor a whole number')
    node = snapshot.get("currentNodeId", "")
    if node is not None and not isinstance(node, str):
        raise refuse('"currentNodeId" is not a string')
    return snapshot


def read_snapshot_file(path: Path) -> dict[str, Any]:
    """A snapshot file as given to ``run --snapshot``: missing is exit 2, unusable exit 3."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise NotFoundError(f"snapshot file {path} does not exist") from None
    except IsADirectoryError:
        raise NotFoundError(f"snapshot file {path} is a folder, not a file") from None
    except OSError as exc:
        raise UnusableStateError(f"snapshot file {path} cannot be read: {exc.strerror}") from exc
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise UnusableStateError(
            f"{path} is not a usable snapshot: not valid JSON ({exc}); it was left as it is"
        ) from None
    return check_shape(data, str(path))
