"""Issue 35 item 4: the selected flow is remembered across a restart of the UI, in
``.flowdrop/ui.json`` (written atomically); a missing, garbled or stale file selects
the first flow, as before, and says nothing."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import orjson

from flowdrop_tui.core.paths import Layout
from tests.tui.tui_helpers import RecordingApp, settled, until

SIZE = (80, 24)
FLOW = """
    from flowdrop_tui import flow

    @flow(resumable=True)
    def main(run):
        run.state["n"] = 1
"""


def three_flows(layout: Layout, flow_writer: Callable[[str, str], Path]) -> None:
    for name in ("alpha", "beta", "gamma"):
        flow_writer(name, FLOW)
    layout.ensure()


async def test_the_selected_flow_is_selected_again_after_a_restart(
    layout: Layout, flow_writer: Callable[[str, str], Path]
) -> None:
    """Each start put the cursor on the first flow, whatever the user had chosen."""
    three_flows(layout, flow_writer)
    memory = layout.root / "ui.json"
    app = RecordingApp(layout)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: settled(app), what="the first reads")
        assert app.main_screen.selected_flow == "alpha"
        await pilot.press("down", "down")
        await until(pilot, lambda: app.main_screen.selected_flow == "gamma")
        await until(pilot, lambda: memory.is_file() and b"gamma" in memory.read_bytes())
    assert orjson.loads(memory.read_bytes()) == {"v": 1, "flow": "gamma"}
    again = RecordingApp(layout)
    async with again.run_test(size=SIZE) as pilot:
        assert again.main_screen.flows.selected_name == "gamma"  # in the first frame
        await until(pilot, lambda: settled(again), what="the first reads")
        assert again.main_screen.selected_flow == "gamma"
        assert again.main_screen.runs.key == "gamma"


async def test_a_garbled_or_stale_memory_selects_the_first_flow(
    layout: Layout, flow_writer: Callable[[str, str], Path]
) -> None:
    three_flows(layout, flow_writer)
    memory = layout.root / "ui.json"
    for junk in (b"\x00garbage{", b'{"v": 1, "flow": "gone"}', b'["beta"]', b'{"v": 9}'):
        memory.write_bytes(junk)
        app = RecordingApp(layout)
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda app=app: settled(app), what="the first reads")
            assert app.main_screen.selected_flow == "alpha", junk
            assert app.said == [], junk
