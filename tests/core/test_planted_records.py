"""Hostile things planted inside ``.flowdrop/`` (issue 27, items 1 and 9): links that
lead out of it, and files that are no regular file. Nothing outside ``.flowdrop/`` is
ever written or deleted (SPEC §16), and no command hangs or fills memory on them.
Each case through the real command, with real links, FIFOs and processes."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from tests.conftest import CLI, paused_mid_run, write_flow

ONE_ROUND = """
    from flowdrop_tui import flow

    @flow(resumable=True)
    def main(run):
        for r in run.rounds(range(1)):
            run.state["n"] = run.state.get("n", 0) + 1
        return "ok"
"""

HELD = """
    import time
    from pathlib import Path
    from flowdrop_tui import flow

    @flow(resumable=True)
    def main(run):
        for r in run.rounds():
            run.state["r"] = r
            while (Path(run.workspace) / "hold").exists():
                time.sleep(0.05)
"""


def run_ids(ws: Path) -> list[str]:
    return sorted(p.name for p in (ws / ".flowdrop" / "runs").iterdir() if p.name[0] != ".")


def sentinel_folder(tmp_path: Path) -> Path:
    """A folder of the user's outside the workspace: a file and a sub-folder with a file."""
    outside = tmp_path / "users-own"
    (outside / "sub").mkdir(parents=True)
    (outside / "sentinel.txt").write_text("the user's own file\n")
    (outside / "sub" / "deeper.txt").write_text("deeper\n")
    return outside


def tree(folder: Path) -> dict[str, bytes | None]:
    """Every entry under ``folder`` and what its files hold (links not followed)."""
    out: dict[str, bytes | None] = {}
    for path in sorted(folder.rglob("*")):
        rel = path.relative_to(folder).as_posix()
        out[rel] = path.read_bytes() if path.is_file() and not path.is_symlink() else None
    return out


@pytest.fixture
def three_runs(workspace: Path, cli: CLI) -> list[str]:
    write_flow(workspace, "a", ONE_ROUND)
    for _ in range(3):
        cli("run", "a", check=0)
    return run_ids(workspace)


# -- item 1: links leading out of .flowdrop/ -------------------------------------------------


@pytest.mark.parametrize("verb", ["prune", "reindex"])
def test_a_trash_link_never_lets_prune_or_reindex_delete_what_it_points_to(
    workspace: Path, cli: CLI, tmp_path: Path, three_runs: list[str], verb: str
) -> None:
    """Guards against a link at `.flowdrop/trash` making `prune` move runs out of
    `.flowdrop/` and delete everything in the folder it points to (and `reindex`, which
    finishes a killed prune, deleting it too)."""
    outside = sentinel_folder(tmp_path)
    before = tree(outside)
    trash = workspace / ".flowdrop" / "trash"
    trash.symlink_to(outside, target_is_directory=True)
    args = ("prune", "--keep", "0") if verb == "prune" else ("reindex",)
    done = cli(*args, check=3)
    assert f"{trash} is a link" in done.stderr and "Traceback" not in done.stderr
    assert "remove the link" in done.stderr
    assert tree(outside) == before
    assert run_ids(workspace) == three_runs  # nothing moved out of .flowdrop/ either
    # the dry run only reads: it still answers
    assert cli("prune", "--keep", "0", "--dry-run", check=0).stdout
    trash.unlink()  # once the link is gone, both work again
    cli(*args, check=0)
    assert tree(outside) == before


def test_a_pins_link_is_never_written_or_deleted_through(
    workspace: Path, cli: CLI, tmp_path: Path, three_runs: list[str]
) -> None:
    """Guards against `pin` writing its pin file through a link at `.flowdrop/pins`
    (and `unpin` deleting through it)."""
    outside = sentinel_folder(tmp_path)
    (outside / three_runs[1]).write_text("a file of the user's that bears a run's name\n")
    before = tree(outside)
    pins = workspace / ".flowdrop" / "pins"
    pins.symlink_to(outside, target_is_directory=True)
    done = cli("pin", three_runs[0], check=3)
    assert f"{pins} is a link" in done.stderr and "Traceback" not in done.stderr
    done = cli("unpin", three_runs[1], check=3)
    assert f"{pins} is a link" in done.stderr
    assert tree(outside) == before
    pins.unlink()
    cli("pin", three_runs[0], check=0)
    assert (pins / three_runs[0]).is_file() and not (pins / three_runs[0]).is_symlink()


@pytest.mark.parametrize("planted", ["run-folder", "runs-folder"])
def test_stop_never_writes_through_a_run_folder_that_is_a_link(
    workspace: Path, cli: CLI, tmp_path: Path, planted: str
) -> None:
    """Guards against `stop` of a paused run appending `stop_requested` and `ended` to
    a record outside `.flowdrop/` when the run's folder (or `runs/`) is a link there."""
    run_id = paused_mid_run(workspace, cli, "held", HELD)
    runs = workspace / ".flowdrop" / "runs"
    outside = tmp_path / "elsewhere"
    if planted == "run-folder":
        outside.mkdir()
        shutil.move(runs / run_id, outside / run_id)
        (runs / run_id).symlink_to(outside / run_id, target_is_directory=True)
        link = runs / run_id
    else:
        shutil.move(runs, outside)
        runs.symlink_to(outside, target_is_directory=True)
        link = runs
    before = tree(outside)
    for verb in ("stop", "resume"):
        done = cli(verb, run_id, check=3)
        assert f"{link} is a link" in done.stderr and "Traceback" not in done.stderr
    assert tree(outside) == before
    # put back, the run is closed as any paused run is
    link.unlink()
    shutil.move(outside / run_id if planted == "run-folder" else outside, link)
    cli("stop", run_id, check=0)
    assert cli.json("show", run_id)["status"] == "cancelled"


def test_a_pin_file_link_is_never_written_through(
    workspace: Path, cli: CLI, tmp_path: Path, three_runs: list[str]
) -> None:
    """A link planted at `pins/<run>` counts as a pin (it is there) and `unpin` removes
    the link only: its target stays."""
    outside = sentinel_folder(tmp_path)
    before = tree(outside)
    pins = workspace / ".flowdrop" / "pins"
    pins.mkdir()
    (pins / three_runs[0]).symlink_to(outside / "sentinel.txt")
    assert "already pinned" in cli("pin", three_runs[0], check=0).stdout
    cli("unpin", three_runs[0], check=0)
    assert not os.path.lexists(pins / three_runs[0])
    assert tree(outside) == before


def test_prune_never_writes_its_ledger_through_a_cache_link(
    workspace: Path, cli: CLI, tmp_path: Path, three_runs: list[str]
) -> None:
    """Guards against `prune` writing its ledger (`cache/runs.json`) through a link at
    `.flowdrop/cache`: the cache is not kept, the prune goes on."""
    outside = sentinel_folder(tmp_path)
    before = tree(outside)
    cache = workspace / ".flowdrop" / "cache"
    shutil.rmtree(cache)  # the runs made one (the flows' descriptions)
    cache.symlink_to(outside, target_is_directory=True)
    cli("prune", "--keep", "0", check=0)
    assert run_ids(workspace) == three_runs[-1:]
    assert tree(outside) == before
