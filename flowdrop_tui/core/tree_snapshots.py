"""A run's round snapshots (SPEC §20): the working tree as a git tree object, made in
a temporary index of the run's own — never the user's index, working tree or refs —
so ``diff --round N`` can show what a round changed, committed or not."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile
import weakref
from pathlib import Path

from flowdrop_tui.core import git

_SNAPSHOT = (
    "git",
    "--no-optional-locks",
    "-c",
    "core.fsync=none",
    "-c",
    "core.splitIndex=false",
    "-c",
    "core.fsmonitor=false",
    "-c",
    "core.untrackedCache=false",
)


class Snapshots:
    """SPEC §20: the working tree as a git tree object (its id), so ``diff`` can show a
    round's changes whether or not it committed them — for one run's rounds. As ``git
    stash create`` does it, but in a temporary index of our own: a copy of the user's
    (so only the files ``git status`` listed are read), kept between snapshots so git's
    cache of trees in it spares ``write-tree`` the whole tree each time (copied again
    whenever the user's index changes). The listed files — and those listed last time,
    put back as they are now — are ``git update-index``ed into it and ``git
    write-tree`` writes the tree. The user's index, working tree and refs are never
    touched; the objects are unreferenced (git's gc keeps them ``gc.pruneExpire``, two
    weeks by default). Files over ``git.BIG_FILE`` stay as the index has them."""

    def __init__(self, workspace: Path, folder: Path | None = None) -> None:
        """``folder``: where the index copy lives (``.flowdrop/cache/snapshots``), named
        for this process; copies left by a process that is gone (a kill -9, a power cut)
        are removed here. ``None``: the system's temporary folder."""
        self.workspace = workspace
        if folder is not None:
            _sweep_orphans(folder)
        fd, name = tempfile.mkstemp(prefix=f"index-{os.getpid()}-", dir=folder)
        os.close(fd)
        self._index = name
        self._source: tuple[int, int, int] | None = None  # the user's index when copied
        self._touched: set[bytes] = set()  # paths updated into the copy, as listed
        self._remove = weakref.finalize(self, _unlink, name)

    def close(self) -> None:
        self._remove()

    def _fresh(self, index: Path) -> bool:
        """The copy is the user's index as it is now (copied again if it changed)."""
        try:
            info = os.stat(index)
        except FileNotFoundError:  # no index yet: git starts an empty one
            _unlink(self._index)
            self._source, self._touched = None, set()
            return True
        except OSError:
            return False
        source = (info.st_ino, info.st_size, info.st_mtime_ns)
        if source != self._source:
            try:
                shutil.copyfile(index, self._index)
            except OSError:
                return False
            self._source, self._touched = source, set()
        return True

    def take(self, scan: git.Scan) -> str | None:
        """The tree ``scan`` saw, as a tree object; ``None`` when git failed."""
        dirs = git.git_dirs(self.workspace)
        top = git.toplevel(self.workspace)
        if dirs is None or top is None:
            return None
        skipped = {os.fsencode(path) for path in scan.skipped}
        if self._touched & skipped:  # a big file now: back to the user's index's version
            self._source = None
        if not self._fresh(dirs[0] / "index"):
            return None
        env = {**os.environ, "GIT_INDEX_FILE": self._index}  # the repository status saw
        paths = sorted((set(scan.changed) | self._touched) - skipped)
        try:
            if paths:
                done = subprocess.run(
                    [*_SNAPSHOT, "update-index", "--add", "--remove", "-z", "--stdin"],
                    cwd=top,
                    env=env,
                    input=b"\0".join(paths) + b"\0",
                    capture_output=True,
                    timeout=120,
                    check=False,
                )
                if done.returncode != 0:
                    self._source = None  # copied again next time
                    return None
            self._touched = set(scan.changed)
            tree = subprocess.run(
                [*_SNAPSHOT, "write-tree"],
                cwd=top,
                env=env,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                timeout=120,
                check=False,
            )
        except (OSError, subprocess.SubprocessError):
            self._source = None
            return None
        found = tree.stdout.decode(errors="replace").strip()
        return found if tree.returncode == 0 and git.is_sha(found) else None


def _unlink(path: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(path)


def _sweep_orphans(folder: Path) -> None:
    """Remove the snapshot index copies in ``folder`` whose process has ended."""
    try:
        names = os.listdir(folder)
    except OSError:
        return
    for name in names:
        parts = name.split("-")
        if len(parts) < 3 or parts[0] != "index" or not parts[1].isdigit():
            continue
        try:
            os.kill(int(parts[1]), 0)
        except ProcessLookupError:
            _unlink(os.path.join(folder, name))
        except (PermissionError, OverflowError):
            continue  # alive as another user, or not a pid: left alone
