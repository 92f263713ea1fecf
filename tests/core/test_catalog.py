"""A flow's runs by page: the catalog and the key run lists behind it."""

from __future__ import annotations

import shutil
from pathlib import Path

import orjson

from flowdrop_tui.core.paths import Layout
from flowdrop_tui.core.records.listing import index, key_runs
from flowdrop_tui.core.records.listing.catalog import RunCatalog
from tests.conftest import CLI
from tests.seeded_records import seed_run


def test_runs_by_key_newest_first_with_pages_and_gone_runs(workspace: Path) -> None:
    """Guards the runs table's source: right runs, right order, pages, kept up to date."""
    ids = [f"20260817T0{h}0000.000Z-aaaaa{h}" for h in range(1, 6)]
    for n, run_id in enumerate(ids):
        seed_run(workspace, run_id, "alpha" if n % 2 == 0 else "beta", minute=n)
    catalog = RunCatalog(Layout(workspace))
    assert catalog.ids_of("alpha") == [ids[4], ids[2], ids[0]]
    assert catalog.ids_of("alpha", limit=2) == [ids[4], ids[2]]
    # The next page starts after the oldest of the last one (the UI's "load more").
    assert catalog.ids_of("alpha", limit=2, before=ids[2]) == [ids[0]]
    assert catalog.ids_of("alpha", limit=2, before=ids[0]) == []
    assert [i.run for i in catalog.runs_of("alpha", 1, before=ids[4])] == [ids[2]]
    assert [info.run for info in catalog.runs_of("beta")] == [ids[3], ids[1]]
    assert catalog.count("alpha") == 3
    newest = seed_run(workspace, "20260817T070000.000Z-bbbbbb", "alpha", minute=7)
    assert catalog.ids_of("alpha")[0] == newest
    shutil.rmtree(workspace / ".flowdrop" / "runs" / ids[0])
    assert ids[0] not in catalog.ids_of("alpha")
    assert catalog.info(ids[2]) is catalog.info(ids[2])  # an ended run is read once


def test_a_lost_key_list_is_rebuilt_from_the_records(workspace: Path) -> None:
    """Guards against a deleted or never-written list hiding a flow's runs."""
    ids = [f"20260817T0{h}0000.000Z-ccccc{h}" for h in range(1, 4)]
    for n, run_id in enumerate(ids):
        seed_run(workspace, run_id, "alpha", minute=n)
    layout = Layout(workspace)
    key_runs.path_of(layout, "alpha").unlink()
    assert key_runs.newest(layout, "alpha") == ids[::-1]
    key_runs.path_of(layout, "alpha").write_text("garbage\n" + ids[0][:10])  # torn, forged
    assert key_runs.newest(layout, "alpha") == []
    index.rebuild(layout)  # reindex rebuilds every list from the records
    assert key_runs.newest(layout, "alpha") == ids[::-1]


def test_the_newest_page_of_a_long_list_is_read_from_its_end(workspace: Path) -> None:
    """Guards the paging across chunk boundaries of the file read backwards."""
    layout = Layout(workspace)
    layout.ensure()
    ids = [f"20260817T{h:02d}{m:02d}00.000Z-{h:02d}{m:02d}aa" for h in range(10) for m in range(60)]
    for run_id in ids:
        (layout.runs / run_id).mkdir()
    key_runs.path_of(layout, "k").write_text("".join(f"{i}\n" for i in ids))
    assert key_runs.newest(layout, "k", 3) == ids[-1:-4:-1]
    assert key_runs.newest(layout, "k") == ids[::-1]
    assert key_runs.newest(layout, "k", 5, before=ids[100]) == ids[99:94:-1]
    assert key_runs.count(layout, "k") == len(ids)


def test_runs_show_the_newest_page_and_say_how_to_see_more(cli: CLI, workspace: Path) -> None:
    """Guards `runs --limit N` / `--all` and the footer naming what is not shown."""
    ids = [f"20260817T0{h}0000.000Z-eeeee{h}" for h in range(1, 6)]
    for n, run_id in enumerate(ids):
        seed_run(workspace, run_id, "alpha", minute=n)
    assert [row["run"] for row in cli.json("runs", "alpha", "--limit", "2")] == ids[:2:-1]
    assert len(cli.json("runs", "--all")) == 5
    shown = cli("runs", "alpha", "--limit", "3", check=0).stdout
    assert "the newest 3 of 5 runs" in shown
    assert cli("runs", "--limit", "0", check=2).returncode == 2


def test_runs_json_page_gives_the_total_and_the_next_page(cli: CLI, workspace: Path) -> None:
    """Issue 26 item 8: `runs --json` gave no total, so a script could not tell it got
    only the newest page. `--page` wraps the list with `total`, `more` and `next_before`;
    `--before RUN` reads the next page (of a flow, or of every run)."""
    ids = [f"20260817T0{h}0000.000Z-eeeee{h}" for h in range(1, 6)]
    for n, run_id in enumerate(ids):
        seed_run(workspace, run_id, "alpha", minute=n)
    first = cli.json("runs", "alpha", "--limit", "2", "--page")
    assert [row["run"] for row in first["runs"]] == [ids[4], ids[3]]
    assert first["total"] == 5 and first["more"] is True and first["next_before"] == ids[3]
    second = cli.json("runs", "alpha", "--limit", "2", "--page", "--before", ids[3])
    assert [row["run"] for row in second["runs"]] == [ids[2], ids[1]]
    last = cli.json("runs", "alpha", "--limit", "2", "--page", "--before", ids[1])
    assert [row["run"] for row in last["runs"]] == [ids[0]]
    assert last["more"] is False and last["next_before"] is None
    every = cli.json("runs", "--limit", "3", "--page", "--before", ids[4])
    assert [row["run"] for row in every["runs"]] == [ids[3], ids[2], ids[1]] and every["more"]
    bare = cli.json("runs", "alpha", "--before", ids[2])  # the bare list pages too
    assert [row["run"] for row in bare] == [ids[1], ids[0]]
    whole = cli.json("runs", "alpha", "--all", "--page")
    assert len(whole["runs"]) == 5 and whole["more"] is False
    text = cli("runs", "alpha", "--limit", "2", check=0).stdout
    assert f"--before {ids[3]}" in text


def test_runs_paging_bad_input_is_exit_2(cli: CLI, workspace: Path) -> None:
    seed_run(workspace, "20260817T010000.000Z-eeeee1", "alpha", minute=0)
    for args, code in (
        (["--before", "../../etc"], "INVALID_NAME"),
        (["--before", "yesterday"], "INVALID_NAME"),
        (["--page"], "USAGE"),
    ):
        done = cli("runs", "alpha", *args, *(["--json"] if args != ["--page"] else []))
        assert done.returncode == 2, (args, done.stdout, done.stderr)
        if args != ["--page"]:
            assert orjson.loads(done.stdout)["error"]["code"] == code, done.stdout
        assert "Traceback" not in done.stderr
