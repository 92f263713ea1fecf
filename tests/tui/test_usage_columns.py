"""Usage in the UI (SPEC §14): the flow list's USAGE column, only when a flow has
usage, and the run pane's usage for the run and each session."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import orjson

from flowdrop_tui.core.paths import Layout
from tests.seeded_records import reindex, seed_run
from tests.tui.tui_helpers import RecordingApp, settled, until

SIZE = (160, 40)
FLOW = """
    from flowdrop_tui import flow

    @flow(resumable=True)
    def main(run):
        run.state["n"] = 1
"""
RUN = "20260817T010000.000Z-aaaaaa"
SPENT = {"input": 6300, "output": 41, "cache_read": 5000, "cache_write": 300}


def add_session(ws: Path, run_id: str, key: str, usage: dict[str, int] | None) -> None:
    cycle = ws / ".flowdrop" / "runs" / run_id / "cycle.jsonl"
    with open(cycle, "ab") as out:
        for event in (
            {
                "t": "2026-08-17T01:00:05.000Z",
                "event": "session_opened",
                "backend": "claude",
                "session": f"{run_id}-000001",
                "key": key,
                "round": 1,
                "command": "claude -p x",
                "link": "sessions/000001-claude.jsonl",
                "target": None,
            },
            {
                "t": "2026-08-17T01:00:06.000Z",
                "event": "session_closed",
                "session": f"{run_id}-000001",
                "exit_code": 0,
                "seconds": 1.0,
                "interrupted": False,
                "target": None,
                "error": None,
                "usage": usage,
            },
        ):
            out.write(orjson.dumps(event) + b"\n")


async def test_usage_shows_in_the_flow_list_and_the_run_pane(
    workspace: Path, flow_writer: Callable[[str, str], Path]
) -> None:
    flow_writer("metered", FLOW)
    flow_writer("plain", FLOW)
    seed_run(workspace, RUN, "metered", last_round=1, state={"n": 1})
    add_session(workspace, RUN, "metered", SPENT)
    reindex(workspace)
    app = RecordingApp(Layout(workspace))
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: settled(app), what="the first reads")
        table = app.main_screen.flows
        await until(pilot, lambda: "usage" in table.columns, what="the USAGE column")
        assert str(table.get_cell("metered", "usage")) == "6.3k/41"
        assert str(table.get_cell("plain", "usage")) == "—"
        detail = app.main_screen.detail
        text = detail.plain_text
        assert "usage 6.3k in (5.0k cache read, 300 cache write), 41 out" in text
        assert "6.3k/41 tokens in/out" in text
        assert "→ None" not in text  # its transcript was never named (Codex names it late)
        assert "claude sessions/000001-claude.jsonl (transcript not named yet)" in text


async def test_no_usage_column_while_no_flow_has_usage(
    workspace: Path, flow_writer: Callable[[str, str], Path]
) -> None:
    flow_writer("plain", FLOW)
    seed_run(workspace, RUN, "plain", last_round=1, state={"n": 1})
    add_session(workspace, RUN, "plain", None)  # a command session: no usage
    reindex(workspace)
    app = RecordingApp(Layout(workspace))
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: settled(app), what="the first reads")
        assert "usage" not in app.main_screen.flows.columns
        text = app.main_screen.detail.plain_text
        assert "usage" not in text
