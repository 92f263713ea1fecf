"""What the power-cut tests share: a real loop-mounted filesystem per case (bench/powercut.py's
`Disk`: ext4 journaled with `commit=600`, ext4 without a journal, ext2), the cut itself (the
image copied as it stands, `e2fsck -fy`, the copy mounted) and the run's environment.

Needs root and loop devices; a test using `disk` is skipped, saying why, where impossible.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))
from faults import can_run as can_strace  # noqa: E402
from powercut import FLOW, Disk, can_run, run_cli, sh  # noqa: E402

__all__ = [
    "FLOW",
    "Disk",
    "can_strace",
    "cut_env",
    "disk",
    "power_back",
    "power_cut",
    "run_cli",
    "sh",
]

WHY = can_run()
FILESYSTEMS = ["ext4", "ext4-nojournal", "ext2"]


def cut_env(**settings: str) -> dict[str, str]:
    """The environment of a power-cut test's commands: no `PC_` setting of the caller's."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("PC_")}
    return {**base, "PYTHONDONTWRITEBYTECODE": "1", **settings}


@pytest.fixture(params=FILESYSTEMS)
def disk(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Disk]:
    if WHY is not None:
        pytest.skip(f"power-cut harness: {WHY}")
    made = Disk(tmp_path, request.param)
    try:
        yield made
    finally:
        made.close()


def power_cut(disk: Disk) -> Path:
    """The power goes now: copy what reached the device, repair it, mount it."""
    shutil.copyfile(disk.image, disk.copy)
    fsck = sh("e2fsck", "-fy", str(disk.copy), check=False)
    assert fsck.returncode < 4, fsck.stdout + fsck.stderr
    disk.mount(disk.copy, disk.copy_mnt)
    return disk.copy_mnt / "ws"


def power_back(disk: Disk) -> None:
    sh("umount", str(disk.copy_mnt), check=False)
    disk.copy.unlink(missing_ok=True)
