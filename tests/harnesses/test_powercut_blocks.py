"""A removed state log's blocks across a power cut on ext2 (issue 27: `e2fsck -fy` exit 4).

The next run picks up a killed run by settling its log: `state.json` made durable from
it, then the log removed. ext2 hands the log's blocks out again at once, while the log's
inode on disk can still list them: a new record folder took the log's indirect block,
was synced, and after a power cut `e2fsck` read the folder's names as block numbers,
"cleared" them by writing zeros into that block, and left a folder it could not repair
("Filesystem still has errors", 7 in 550 ext2 cut points of bench/powercut.py). The
log's blocks are now given back durably before its name goes: its inode on disk lists
none once the removal returns, whatever the allocator does next.

A real loop-mounted ext2 (tests/harnesses/powercut_disk.py; needs root, loop devices and strace,
skipped, saying why, where impossible). The cut is exact: `strace -P` stops the run
right after the one call on the path named (the `fsync` of the run's folder that ends
the log's removal, the `fsync` that makes the new record's name durable).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from tests.harnesses import powercut_disk
from tests.harnesses.powercut_disk import Disk, cut_env, run_cli, sh

WHY = powercut_disk.WHY or powercut_disk.can_strace()


@pytest.fixture
def ext2(tmp_path: Path) -> Iterator[Disk]:
    if WHY is not None:
        pytest.skip(f"power-cut harness: {WHY}")
    made = Disk(tmp_path, "ext2")
    try:
        yield made
    finally:
        made.close()


def stopped_at(
    disk: Disk,
    scratch: Path,
    path: Path,
    call: str,
    when: int,
    env: dict[str, str],
    watch: Path | None = None,
) -> str:
    """Run `run count` stopped right after its `when`th `call` on `path`, copy the image
    as it stands (the power cut), end the run; what strace saw of the calls on `path`
    (`unlink` included) and of the `unlink` of `watch`."""
    trace, err = scratch / "trace", scratch / "err"
    trace.unlink(missing_ok=True)
    with open(err, "w") as e:
        run = subprocess.Popen(
            ["strace", "-qq", "-o", str(trace), "-P", str(path),
             *(["-P", str(watch)] if watch else []), "-e", f"trace={call},unlink",
             "-e", f"inject={call}:signal=SIGSTOP:when={when}",
             sys.executable, "-m", "flowdrop_tui", "run", "count"],
            cwd=disk.ws, env=env, stdout=subprocess.DEVNULL, stderr=e,
        )  # fmt: skip
        try:
            deadline = time.monotonic() + 60
            while b"stopped by SIGSTOP" not in _read(trace):
                assert run.poll() is None, f"the run ended first: {err.read_text()[-500:]}"
                assert time.monotonic() < deadline, f"no {call} #{when} of {path} in 60 s"
                time.sleep(0.005)
            shutil.copyfile(disk.image, disk.copy)
        finally:
            for child in _children(run.pid):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(child, 9)
            run.kill()
            run.wait()
    return _read(trace).decode(errors="replace")


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError:
        return b""


def _children(pid: int) -> list[int]:
    try:
        return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def killed_with_its_log(disk: Disk, env: dict[str, str]) -> tuple[Path, int]:
    """A run killed mid-way (its log outlives it), then everything on disk: the run's
    folder and the last `n` it saved."""
    run = subprocess.Popen(
        [sys.executable, "-m", "flowdrop_tui", "run", "count"],
        cwd=disk.ws, env={**env, "PC_ROUNDS": "1000"}, stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    assert run.stdout is not None
    saved = 0
    for line in run.stdout:
        found = re.match(r"saved (\d+) round", line)
        if found and int(found.group(1)) >= 5:
            saved = int(found.group(1))
            break
    run.kill()
    run.wait()
    assert saved, "the run never reported its fifth save"
    runs = disk.ws / ".flowdrop" / "runs"
    (folder,) = [p for p in runs.iterdir() if (p / "state.log").exists()]
    disk.settle()
    return folder, saved


def on_disk(image: Path, inode: int) -> tuple[int, int]:
    """The inode's generation and how many blocks it lists in the image (`debugfs`)."""
    said = sh("debugfs", "-R", f"stat <{inode}>", str(image)).stdout
    generation = re.search(r"Generation: (\d+)", said)
    blocks = re.search(r"Blockcount: (\d+)", said)
    assert generation and blocks, said
    return int(generation.group(1)), int(blocks.group(1))


@pytest.mark.parametrize("cut", ["the log's removal", "the new record's name"])
def test_a_settled_log_claims_no_block_after_a_power_cut_on_ext2(
    ext2: Disk, tmp_path: Path, cut: str
) -> None:
    """Guards against the log's inode coming back after a cut still listing the blocks
    ext2 gave since to the next record (e2fsck then wrote zeros into it: exit 4).

    The run that picks the killed run up is cut once the log's removal returns, or once
    its own record's name is durable; on the copy the old log's inode lists no block, `e2fsck
    -fy` repairs the copy, and the next run there starts from the last reported save,
    `runs` listing every run with a record."""
    env = cut_env(PC_ROUNDS="3", PC_PAUSE="0")
    folder, saved = killed_with_its_log(ext2, env)
    log = folder / "state.log"
    # state.json behind the log (as a cut can leave it): the settle writes it durably,
    # its folder's first sync; the log's removal syncs the folder next
    (folder / "state.json").write_bytes(b'{"count": {"n": 0, "half": 0}}')
    before = os.stat(log).st_mtime_ns - 10**9  # written before the log, as a cut leaves
    os.utime(folder / "state.json", ns=(before, before))  # it (a newer one is an edit)
    ext2.settle()
    inode = os.stat(log).st_ino
    generation, blocks = on_disk(ext2.image, inode)
    assert blocks > 0
    if cut == "the log's removal":
        seen = stopped_at(ext2, tmp_path, folder, "fsync", 2, env, watch=log)
    else:
        seen = stopped_at(ext2, tmp_path, folder.parent, "fsync", 1, env)
    assert not log.exists(), seen  # settled by the run that picked it up
    if cut == "the log's removal":
        assert seen.index(f'unlink("{log}")') < seen.index("SIGSTOP"), seen
    after = on_disk(ext2.copy, inode)  # the log's own inode, or a new file's since
    assert after[0] != generation or after[1] == 0, "the removed log's inode lists its blocks"
    fsck = sh("e2fsck", "-fy", str(ext2.copy), check=False)
    assert fsck.returncode < 4, fsck.stdout + fsck.stderr
    ext2.mount(ext2.copy, ext2.copy_mnt)
    try:
        ws = ext2.copy_mnt / "ws"
        nxt = run_cli(ws, "run", "count", env={**env, "PC_ROUNDS": "1"})
        assert nxt.returncode == 0, nxt.stderr
        start = re.search(r"^start (\d+)$", nxt.stdout, re.M)
        assert start is not None and int(start.group(1)) >= saved, nxt.stdout
        listed = run_cli(ws, "runs", "--json", env=env)
        assert listed.returncode == 0, listed.stderr
        records = sorted(
            p.name
            for p in (ws / ".flowdrop" / "runs").iterdir()
            if (p / "cycle.jsonl").is_file() and not p.name.startswith(".")
        )
        assert sorted(row["run"] for row in orjson.loads(listed.stdout)) == records
        assert folder.name in records
        assert not (ws / ".flowdrop" / "runs" / folder.name / "state.log").exists()
    finally:
        sh("umount", str(ext2.copy_mnt), check=False)
