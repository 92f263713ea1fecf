"""Looking up one key checks that key's entry against the records — and only it."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import orjson

from flowdrop_tui.core.paths import Layout
from flowdrop_tui.core.records.listing import index
from flowdrop_tui.core.run.start_plan import plan
from tests.flow_bodies import ADDS_ONE_A_RUN


def run_ids(ws: Path) -> list[str]:
    runs = ws / ".flowdrop" / "runs"
    return sorted(p.name for p in runs.iterdir() if not p.name.startswith("."))


def test_a_lookup_whose_entry_names_a_gone_run_rebuilds(
    workspace: Path, flow_writer: Callable[[str, str], Path], cli: Callable[..., object]
) -> None:
    """Guards against picking up from, or failing on, a run whose record was removed."""
    flow_writer("a", ADDS_ONE_A_RUN)
    cli("run", "a", check=0)
    cli("run", "a", check=0)
    first, second = run_ids(workspace)
    shutil.rmtree(workspace / ".flowdrop" / "runs" / second)
    layout = Layout(workspace)
    entry = index.lookup(layout, "a")
    assert entry is not None and entry["last_run"] == first and entry["source"] == first
    assert plan(layout, "a", resumable=True).source == first


def test_another_keys_gone_run_does_not_make_a_lookup_scan_the_workspace(
    workspace: Path, flow_writer: Callable[[str, str], Path], cli: Callable[..., object]
) -> None:
    """Guards against a lookup whose cost grows with the workspace (every entry checked
    against the records): it answers from its own entry; the full load still repairs."""
    flow_writer("a", ADDS_ONE_A_RUN)
    flow_writer("b", ADDS_ONE_A_RUN)
    cli("run", "a", check=0)
    cli("run", "b", check=0)
    (run_a,) = [r for r in run_ids(workspace) if _key_of(workspace, r) == "a"]
    layout = Layout(workspace)
    data = orjson.loads(layout.index.read_bytes())
    data["keys"]["b"]["last_run"] = data["keys"]["b"]["source"] = "20000101T000000.000Z-000000"
    layout.index.write_bytes(orjson.dumps(data))
    before = layout.index.read_bytes()

    entry = index.lookup(layout, "a")
    assert entry is not None and entry["source"] == run_a
    assert layout.index.read_bytes() == before  # not rebuilt for someone else's entry

    repaired = index.load(layout)  # the flow list checks every entry
    assert repaired["keys"]["b"]["last_run"] != "20000101T000000.000Z-000000"
    assert (layout.runs / repaired["keys"]["b"]["last_run"]).is_dir()


def _key_of(ws: Path, run_id: str) -> str:
    first = (ws / ".flowdrop" / "runs" / run_id / "cycle.jsonl").read_bytes().split(b"\n")[0]
    return str(orjson.loads(first)["key"])
