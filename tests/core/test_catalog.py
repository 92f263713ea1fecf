"""RunCatalog: a flow's runs without re-reading every run's first line each time."""

from __future__ import annotations

import shutil
from pathlib import Path

from flowdrop_tui.core.paths import Layout
from flowdrop_tui.core.records.catalog import RunCatalog
from tests.seeded_records import seed_run


def test_runs_by_key_newest_first_learning_new_and_forgetting_gone(workspace: Path) -> None:
    """Guards the runs table's source: right runs, right order, kept up to date cheaply."""
    ids = [f"20260817T0{h}0000.000Z-aaaaa{h}" for h in range(1, 6)]
    for n, run_id in enumerate(ids):
        seed_run(workspace, run_id, "alpha" if n % 2 == 0 else "beta", minute=n)
    catalog = RunCatalog(Layout(workspace))
    assert catalog.refresh() == ids
    assert catalog.ids_of("alpha") == [ids[4], ids[2], ids[0]]
    assert catalog.ids_of("alpha", limit=2) == [ids[4], ids[2]]
    assert [info.run for info in catalog.runs_of("beta")] == [ids[3], ids[1]]
    assert catalog.count("alpha") == 3
    newest = seed_run(workspace, "20260817T070000.000Z-bbbbbb", "alpha", minute=7)
    assert catalog.refresh() == [newest]  # only the new one is read
    assert catalog.ids_of("alpha")[0] == newest
    shutil.rmtree(workspace / ".flowdrop" / "runs" / ids[0])
    catalog.refresh()
    assert ids[0] not in catalog.ids_of("alpha")
    assert catalog.info(ids[2]) is catalog.info(ids[2])  # an ended run is read once
