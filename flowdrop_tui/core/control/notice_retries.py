"""Notices a sink did not take (SPEC §21): tried again on a schedule, then kept as
undelivered, an inbox item a person can see and dismiss.

A failed try of one sink leaves ``.flowdrop/notices/retry/<slug>.json``
(``{"v", "sink", "body", "tries", "due", "error"}``; ``slug`` names the notice and
the sink, so a sink that took a notice is never tried again for it). The one sender
(``deliver.lock``) takes an entry that is due by renaming it to ``<slug>.trying``
before the sink runs: a success removes it, a failure writes it back with the next
wait of the schedule (``[notify] retry``, ``RETRY`` by default: 6 tries over ~10
minutes), and the last failure moves it to ``notices/undelivered/<slug>.json``.

**Never twice.** Only the lock's holder tries, one entry at a time. A ``.trying``
file found when a sender takes the lock was left by a sender that died during the
try: the sink may have taken the notice, so it is not tried again — it is kept as
undelivered, saying the outcome is unknown.
"""

from __future__ import annotations

import contextlib
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from flowdrop_tui.core.files.atomic import write_atomic
from flowdrop_tui.core.paths import Layout
from flowdrop_tui.core.times import now_iso

RETRY = (10.0, 30.0, 90.0, 180.0, 300.0)  # the waits before tries 2–6: ~10 minutes in all
VERSION = 1
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


@dataclass
class Retry:
    """One notice for one sink, due again (``path``: its ``.trying`` name once taken)."""

    path: Path
    sink: str
    body: dict[str, Any]
    tries: int


def _folder(layout: Layout, name: str) -> Path:
    return layout.folder(layout.root / "notices" / name)


def _slug(body: dict[str, Any], sink: str) -> str:
    return _UNSAFE.sub("_", f"{body.get('id')}.{sink}")


def failed(
    layout: Layout,
    sink: str,
    body: dict[str, Any],
    tries: int,
    error: str,
    schedule: tuple[float, ...],
) -> None:
    """Try number ``tries`` of ``sink`` failed: due again after the schedule's next wait,
    or, past its last, undelivered."""
    slug = _slug(body, sink)
    if tries <= len(schedule):
        entry = {
            "v": VERSION,
            "sink": sink,
            "body": body,
            "tries": tries,
            "due": time.time() + schedule[tries - 1],
            "error": error,
        }
        write_atomic(_folder(layout, "retry") / f"{slug}.json", orjson.dumps(entry))
    else:
        _undelivered(layout, slug, sink, body, f"{tries} tries, the last: {error}")


def _undelivered(layout: Layout, slug: str, sink: str, body: dict[str, Any], why: str) -> None:
    item = {"v": VERSION, "sink": sink, "body": body, "why": why, "at": now_iso()}
    write_atomic(_folder(layout, "undelivered") / f"{slug}.json", orjson.dumps(item))


def _read(path: Path) -> dict[str, Any] | None:
    try:
        data = orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return None
    if not isinstance(data, dict) or not isinstance(data.get("body"), dict):
        return None
    return data


def sweep(layout: Layout) -> None:
    """A sender that has just taken the lock: every ``.trying`` left is a try whose
    outcome no one knows — undelivered, never tried again."""
    folder = _folder(layout, "retry")
    for path in folder.glob("*.trying"):
        data = _read(path)
        if data is not None and not path.with_suffix(".json").exists():  # (else: it failed)
            why = "its sender stopped during a try: it may or may not have arrived"
            _undelivered(layout, path.stem, str(data.get("sink")), data["body"], why)
        with contextlib.suppress(OSError):
            path.unlink()


def pending(layout: Layout) -> list[dict[str, Any]]:
    folder = _folder(layout, "retry")
    return [d for p in sorted(folder.glob("*.json")) if (d := _read(p)) is not None]


def next_due(layout: Layout) -> float | None:
    """When the first waiting retry is due (``time.time()``), or None when none waits."""
    dues = [d.get("due") for d in pending(layout)]
    numbers = [float(d) for d in dues if isinstance(d, int | float)]
    return min(numbers) if numbers else (0.0 if dues else None)


def take_due(layout: Layout) -> list[Retry]:
    """The retries due now, each renamed to ``.trying`` (taken: see ``sweep``)."""
    folder = _folder(layout, "retry")
    now = time.time()
    taken = []
    for path in sorted(folder.glob("*.json")):
        data = _read(path)
        due = data.get("due") if data else None
        if data is not None and isinstance(due, int | float) and due > now:
            continue
        trying = path.with_suffix(".trying")
        try:
            os.rename(path, trying)
        except OSError:
            continue
        if data is None:  # junk where an entry was: nothing to try
            with contextlib.suppress(OSError):
                trying.unlink()
            continue
        tries = data.get("tries")
        count = tries if isinstance(tries, int) and tries > 0 else 1
        taken.append(Retry(trying, str(data.get("sink")), data["body"], count))
    return taken


def settle(retry: Retry | None) -> None:
    """A taken retry that was tried (its outcome written) or is no longer wanted."""
    if retry is not None:
        with contextlib.suppress(OSError):
            retry.path.unlink()


def undelivered(layout: Layout) -> list[dict[str, Any]]:
    """The notices no sink took, as the inbox lists them (kind ``undelivered``)."""
    folder = layout.root / "notices" / "undelivered"
    if not folder.is_dir() or folder.is_symlink():
        return []
    found = []
    for path in sorted(folder.glob("*.json")):
        data = _read(path)
        body = data["body"] if data else {}
        run, notice_id = body.get("run"), body.get("id")
        if not isinstance(run, str) or not isinstance(notice_id, str) or "/" not in notice_id:
            continue
        if not (layout.runs / run).is_dir():
            continue  # its run was pruned: nothing left to see
        assert data is not None
        sink = str(data.get("sink"))
        item_id = f"{run}/undelivered-{sink}-{notice_id.split('/', 1)[1]}"
        found.append(
            {
                "id": item_id,
                "kind": "undelivered",
                "run": run,
                "flow": body.get("flow"),
                "message": f"notice not delivered to {sink} ({data.get('why')}): "
                f"{body.get('message')}"[:500],
                "at": data.get("at"),
                "action": "dismiss",
                "command": f"flowdrop-tui inbox --dismiss {item_id}",
                "notice": notice_id,
                "sink": sink,
            }
        )
    return found
