"""What the UI tests share."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from flowdrop_tui.core.control import verbs
from flowdrop_tui.core.errors import TerminalSnapshotError
from flowdrop_tui.core.paths import Layout
from flowdrop_tui.core.records.run_record.run_fold import list_run_ids, load_run
from flowdrop_tui.core.records.run_record.run_info import LIVE


@pytest.fixture
def layout(workspace: Path) -> Iterator[Layout]:
    """The workspace's layout; any run a test left live is stopped now at the end."""
    layout = Layout(workspace)
    yield layout
    for run_id in list_run_ids(layout):
        if load_run(layout, run_id).status in LIVE:
            # it may end by itself meanwhile: stop then refuses, and nothing is left live
            with contextlib.suppress(TerminalSnapshotError):
                verbs.stop(layout, run_id, now=True)
