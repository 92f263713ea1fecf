"""Run records with fixed ids and times, written as the engine writes them, so that
screens and listings built from them are the same on every machine."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from flowdrop_tui.core.paths import Layout
from flowdrop_tui.core.records.listing import index, key_runs


def seed_run(
    ws: Path,
    run_id: str,
    key: str,
    *,
    first_round: int = 1,
    last_round: int = 3,
    outcome: str | None = "cancelled",
    source: str | None = None,
    state: dict[str, Any] | None = None,
    minute: int = 0,
) -> str:
    """A finished run's record as the engine writes it, with times fixed by ``minute``."""
    layout = Layout(ws)
    layout.ensure()
    key_runs.append_locked(layout, key, run_id)  # as the engine does, before the record
    folder = layout.runs / run_id
    (folder / "sessions").mkdir(parents=True)
    base = f"2026-08-17T{1 + minute // 60:02d}:{minute % 60:02d}"

    def at(second: int) -> str:
        return f"{base}:{second:02d}.000Z"

    events: list[dict[str, Any]] = [
        {
            "t": at(0),
            "event": "created",
            "v": 1,
            "run": run_id,
            "key": key,
            "flow": f"flows/{key}",
            "start": "thread" if source else "fresh",
            "source": source,
            "source_status": "cancelled" if source else None,
            "snapshot": None,
            "first_round": first_round,
            "resumable": True,
            "pid": 4242,
            "pgid": 4242,
            "host": "seed",
            "git": None,
        },
        {"t": at(1), "event": "started", "pid": 4242, "pgid": 4242},
    ]
    second = 1
    for number in range(first_round, last_round + 1):
        events.append(
            {"t": at(second), "event": "round_started", "key": key, "round": number, "index": None}
        )
        second += 2
        events.append(
            {
                "t": at(second),
                "event": "round_ended",
                "key": key,
                "round": number,
                "index": None,
                "outcome": "ok",
                "seconds": 2.0,
            }
        )
    if outcome is not None:
        events.append(
            {
                "t": at(second + 1),
                "event": "ended",
                "outcome": outcome,
                "result": None,
                "error": None,
                "git": None,
                "round": last_round,
            }
        )
    (folder / "cycle.jsonl").write_bytes(b"".join(orjson.dumps(ev) + b"\n" for ev in events))
    (folder / "state.json").write_bytes(orjson.dumps({key: state or {}}))
    (folder / "output.log").touch()
    return run_id


def reindex(ws: Path) -> None:
    index.rebuild(Layout(ws))
