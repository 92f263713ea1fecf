"""Hostile things planted inside ``.flowdrop/`` (issue 27, items 1 and 9): links that
lead out of it, and files that are no regular file. Nothing outside ``.flowdrop/`` is
ever written or deleted (SPEC §16), and no command hangs or fills memory on them.
Each case through the real command, with real links, FIFOs and processes."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
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


# -- item 9: a FIFO or a /dev/zero link in a record folder ---------------------------------

HANG_GUARD = 60  # seconds: a guard against a hang, not a speed assertion (bench/ times it)
MEMORY_CAP = 1 << 30  # 1 GiB of address space: /dev/zero read whole had grown `run` to 7 GB


def _cap_memory() -> None:
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP, MEMORY_CAP))


def _answer(ws: Path, *args: str) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(
            [sys.executable, "-m", "flowdrop_tui", *args],
            cwd=ws,
            capture_output=True,
            text=True,
            timeout=HANG_GUARD,
            preexec_fn=_cap_memory,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"`flowdrop-tui {' '.join(args)}` did not return in {HANG_GUARD} s (hung)")


def _plant(path: Path, kind: str) -> None:
    if path.exists() or path.is_symlink():
        path.unlink()
    if kind == "fifo":
        os.mkfifo(path)
    else:
        path.symlink_to("/dev/zero")


@pytest.mark.parametrize("kind", ["fifo", "dev-zero"])
@pytest.mark.parametrize("planted", ["state.json", "cycle.jsonl", "index.json", "keys-runs"])
def test_a_fifo_or_dev_zero_in_the_records_never_hangs_or_fills_memory(
    workspace: Path, cli: CLI, planted: str, kind: str
) -> None:
    """Guards against a FIFO or a link to `/dev/zero` planted in a record folder hanging
    `flows`, `runs`, `show`, `plan`, `prune`, `run` and `reindex` (a FIFO: for good, `run`
    holding its key's lock meanwhile) or growing them without bound (`/dev/zero` as a
    `state.json` had grown `run` to 7.4 GB in 4 s): only regular files are read, files
    that should be small are read up to a cap."""
    write_flow(workspace, "a", ONE_ROUND)
    cli("run", "a", check=0)
    cli("run", "a", check=0)
    last = run_ids(workspace)[-1]
    root = workspace / ".flowdrop"
    target = {
        "state.json": root / "runs" / last / "state.json",
        "cycle.jsonl": root / "runs" / last / "cycle.jsonl",
        "index.json": root / "index.json",
        "keys-runs": root / "keys" / "a.runs",
    }[planted]
    _plant(target, kind)
    for args in (
        ("flows",),
        ("runs",),
        ("runs", "a"),
        ("show", last),
        ("plan", "a"),
        ("prune", "--dry-run"),
        ("prune", "--keep", "5"),
        ("run", "a"),
        ("reindex",),
        ("flows",),
    ):
        done = _answer(workspace, *args)
        assert "Traceback" not in done.stderr, (args, done.stderr[-3000:])
        assert done.returncode in (0, 3), (args, done.returncode, done.stderr[-3000:])
        if planted == "state.json" and args[0] in ("run", "plan"):
            # the state to pick up from is unusable: refused naming it (INT-15)
            assert done.returncode == 3, (args, done.stdout, done.stderr)
            said = done.stdout + done.stderr  # (`plan` says its refusal on stdout)
            assert str(target) in said and "not a regular file" in said
    if planted in ("state.json", "cycle.jsonl"):  # a record: left as it is
        assert target.is_fifo() if kind == "fifo" else target.is_symlink()
