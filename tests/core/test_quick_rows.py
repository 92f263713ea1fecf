"""The first paint's flow list: from discovery, the describe cache and the index only."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from flowdrop_tui.core import views
from flowdrop_tui.core.flows.discovery import describe, discover
from flowdrop_tui.core.paths import Layout
from tests.seeded_records import reindex, seed_run

MARKING = """
    from pathlib import Path
    from flowdrop_tui import flow

    Path(__file__).with_name("imported").write_text("yes")  # proof that it was loaded

    @flow(resumable=True, description="marks")
    def main(run):
        return 1
"""


def test_quick_rows_start_no_process_and_use_the_cache_once_it_is_there(
    workspace: Path, flow_writer: Callable[[str, str], Path]
) -> None:
    """Guards the first paint against loading flows: an undescribed flow is named and
    marked not described; once described, its declaration comes from the cache."""
    folder = flow_writer("mark", MARKING)
    seed_run(workspace, "20260817T010000.000Z-aaaaaa", "mark", last_round=4)
    reindex(workspace)
    layout = Layout(workspace)
    rows = views.quick_flow_rows(layout)
    assert rows[0]["name"] == "mark" and rows[0]["described"] is False
    assert rows[0]["round"] == 4 and rows[0]["last_run"] == "20260817T010000.000Z-aaaaaa"
    assert not (folder / "imported").exists()
    describe(layout, discover(layout))
    assert (folder / "imported").exists()
    (folder / "imported").unlink()  # the cache is keyed by content: put it back as it was
    rows = views.quick_flow_rows(layout)
    assert rows[0]["described"] is True and rows[0]["resumable"] is True
    assert rows[0]["description"] == "marks"
    assert not (folder / "imported").exists()
