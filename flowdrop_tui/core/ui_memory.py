"""What the terminal UI remembers between two openings: ``.flowdrop/ui.json``,
``{"v": 1, "flow": NAME}`` — the flow that was selected, selected again at the next
start. Replaced whole (``write_atomic``, not synced: losing it to a power cut only
selects the first flow); a missing, linked or garbled file is no memory at all."""

from __future__ import annotations

import contextlib
import os

import orjson

from flowdrop_tui.core.files.atomic import write_atomic
from flowdrop_tui.core.paths import Layout

UI_FILE = "ui.json"
UI_VERSION = 1
MAX_BYTES = 64 << 10  # far more than a flow's name needs: a bigger file is not ours


def remembered_flow(layout: Layout) -> str | None:
    """The flow selected when the UI last moved its cursor here, if it says one."""
    try:
        fd = os.open(layout.root / UI_FILE, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        found = orjson.loads(os.read(fd, MAX_BYTES))
    except (OSError, orjson.JSONDecodeError):
        return None
    finally:
        os.close(fd)
    if not isinstance(found, dict) or found.get("v") != UI_VERSION:
        return None
    flow = found.get("flow")
    return flow if isinstance(flow, str) and flow else None


def remember_flow(layout: Layout, name: str) -> None:
    """Keep ``name`` as the selected flow; nothing when there is no ``.flowdrop/`` yet
    (the UI only looked) or it cannot be written (a read-only workspace: no memory)."""
    if not layout.root.is_dir():
        return
    with contextlib.suppress(OSError):
        write_atomic(
            layout.root / UI_FILE,
            orjson.dumps({"v": UI_VERSION, "flow": name}),
            durable=False,
        )
