"""Reading ``.flowdrop/index.json`` as it is on disk, and checking its shape (SPEC §8).

The read side of ``index.py`` in a module of its own, importing only what reading
needs: the UI's first frame shows the flow list from this read, before the records
behind the index (the runs' folds, the key lists, the trash) are imported
(bench/README.md, (a)). ``index`` re-exports every name here.
"""

from __future__ import annotations

import os
from typing import Any

import orjson

from flowdrop_tui.core.files.regular import read_regular
from flowdrop_tui.core.paths import RUN_ID_RE, Layout

INDEX_VERSION = 1
STALE = "index.stale"
Entry = dict[str, Any]
Index = dict[str, Any]


# The "flow" a LangGraph thread's runs name (SPEC §22): a key with no folder under flows/.
GRAPH_FLOW = "langgraph"

_run_id = RUN_ID_RE.match


def valid_entry(entry: Any) -> bool:
    """An entry shaped as this engine writes it.

    The index is read from disk, so it is checked like any input: a forged or
    damaged one naming ``../../x`` as a run must not make a reader look outside
    ``.flowdrop/runs``, and a round that is not a number must not crash a listing.
    Every entry is checked on every read, so this is written for speed (exact
    type tests, one regex match when the source is the last run, as it usually
    is): bench/resolve.py.
    """
    if type(entry) is not dict:
        return False
    last = entry.get("last_run")
    if type(last) is not str or _run_id(last) is None:
        return False
    source = entry.get("source")
    if source is not None and source != last and (type(source) is not str or not _run_id(source)):
        return False
    status, round_, flow = entry.get("status"), entry.get("round"), entry.get("flow")
    return (
        (status is None or type(status) is str)
        and type(round_) is int
        and round_ >= 0
        and (flow is None or type(flow) is str)
    )


def valid(data: Any) -> bool:
    """Anything else than a whole index of this version is unusable: it is rebuilt.

    Every entry's shape is checked, even for a lookup of one key: a damaged entry
    says the file cannot be trusted (the key asked about may be what was lost),
    and the check is in memory, a fraction of parsing the file. What a lookup
    does *not* do is touch the disk for other keys (``index._stale``).
    """
    if not isinstance(data, dict) or data.get("v") != INDEX_VERSION:
        return False
    keys = data.get("keys")
    return isinstance(keys, dict) and all(valid_entry(entry) for entry in keys.values())


def read(layout: Layout) -> Index | None:
    """The index as on disk, or ``None`` when missing, unreadable, of another version,
    or marked behind the records (``index.invalidate``)."""
    if os.path.lexists(layout.root / STALE):
        return None
    try:
        data = orjson.loads(read_regular(layout.index))  # never a FIFO, never endless
    except (OSError, orjson.JSONDecodeError):
        return None
    return data if valid(data) else None
