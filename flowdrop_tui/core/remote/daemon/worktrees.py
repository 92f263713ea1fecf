"""Where a run's code comes from on a worker (docs/decisions.md,
"Runs on Temporal workers" and "Remote mode: reading").

Locally the workspace itself is the run's checkout. On a worker each run gets its
own detached worktree of the commit the client asked for (a resumed run: of its own
commits, ``checkout_run``), from a mirror clone of the origin kept in the worker's
home (``MirrorWorktrees``), fetched only when it lacks what a start asks for; its
commits are pushed to ``refs/flowdrop/runs/<run>`` (``git.run_ref``) on the origin
(so ``show`` lists them from anywhere) before the worktree goes.

Warm: a run that ended by itself leaves its worktree **parked** for the next run of
the same space (``park``), its replica of the records and its cursor kept, so the
next start moves it to its commit (``checkout --force``, ``clean``) and syncs only
what changed since, instead of a new worktree and a replica of the whole space. A
run ended any other way (killed, fenced) has its worktree removed, and a restarted
worker drops every parked one (``sweep``): their local files are working copies
whose syncs a power cut may have lost (docs/remote.md, "Durability").

Every git call is a short ``git`` child process: a worker is long-running, and
gitpython leaks there (core/git.py).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shutil
import subprocess
import time
from pathlib import Path

from flowdrop_tui.core.control import process
from flowdrop_tui.core.errors import GitError, InvalidNameError
from flowdrop_tui.core.files import locks
from flowdrop_tui.core.git import run_ref
from flowdrop_tui.core.lanes.place import BRANCH_PREFIX
from flowdrop_tui.core.paths import Layout, check_run_ref
from flowdrop_tui.core.remote.remote_errors import NotOnOriginError

_SHA = re.compile(r"^[0-9a-fA-F]{4,64}$")
GIT_TIMEOUT = 300.0  # a fetch of a big origin; a hung one is an error, never a hung worker
PARK_MAX = 4  # worktrees kept warm per space (more ended runs at once: removed)
_KEPT = ".flowdrop"  # what a parked worktree keeps besides its tracked files: the replica


def git(args: list[str], *, cwd: Path | None = None, what: str) -> str:
    """Run ``git``; its failure is a ``GitError`` naming ``what`` was being done."""
    env = {**os.environ, "GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C"}
    try:
        done = subprocess.run(
            ["git", *args],
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
            timeout=GIT_TIMEOUT,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise GitError(f"could not {what}: {exc}") from exc
    if done.returncode != 0:
        detail = (done.stderr or done.stdout).strip()[-1500:]
        raise GitError(f"could not {what} (git {args[0]}): {detail}")
    return done.stdout


class MirrorWorktrees:
    """A worker's runs: one mirror clone of ``origin`` under ``home``, a worktree per run."""

    def __init__(self, origin: str, home: Path) -> None:
        self.origin = origin
        self.home = home
        digest = hashlib.sha256(origin.encode()).hexdigest()[:16]
        self.mirror = home / "mirrors" / f"{digest}.git"
        self.worktrees = home / "worktrees"
        self.parked = home / "parked" / digest
        self._lock = home / "mirrors" / f"{digest}.lock"

    def _fetch(self) -> None:
        """Bring the mirror up to the origin (a clone the first time)."""
        if (self.mirror / "HEAD").exists():
            git(
                ["fetch", "--prune", "--quiet", self.origin, "+refs/*:refs/*"],
                cwd=self.mirror,
                what=f"fetch {self.origin} into {self.mirror}",
            )
            return
        partial = self.mirror.with_name(self.mirror.name + ".new")
        shutil.rmtree(partial, ignore_errors=True)
        git(
            ["clone", "--mirror", "--quiet", self.origin, str(partial)],
            what=f"clone {self.origin} into {self.mirror}",
        )
        partial.rename(self.mirror)

    def checkout(self, commit: str, name: str, *, pool: str | None = None) -> Path:
        """A detached worktree of ``commit``, named ``name`` under the home: one parked
        for ``pool`` moved there when there is one, else a new one."""
        return self._checkout(commit, name, (), pool)[0]

    def checkout_run(
        self, run_id: str, commit: str, name: str, *, pool: str | None = None
    ) -> tuple[Path, bool]:
        """A detached worktree where run ``run_id`` left off: the commit its worker
        pushed to its ref on the origin (``True``), else ``commit`` (``False``: the run
        pushed none — a worker lost before its first push)."""
        if not check_run_ref(run_id):
            raise InvalidNameError(f"invalid run id {run_id!r}: it names no run to check out")
        tree, found = self._checkout(commit, name, (run_ref(run_id),), pool)
        return tree, found is not None

    def checkout_lane(
        self,
        branch: str,
        commit: str,
        name: str,
        *,
        run_id: str | None = None,
        pool: str | None = None,
    ) -> tuple[Path, str | None, bool]:
        """A detached worktree of a lane's tip: the commit the origin's
        ``refs/heads/<branch>`` names (fetched now); without one, a resumed run's own
        ref (``run_id``: its commits, pushed before any round of it ended), else
        ``commit`` (the lane's first run). What the origin's branch was then
        (``None``: absent) — the lease of the run's pushes to it (``lane_push``) — and
        whether it came from either ref. Detached, as every run's: a branch checked
        out in a worktree of the mirror would stop the mirror's fetches."""
        if not branch.startswith(BRANCH_PREFIX):
            raise InvalidNameError(f"{branch!r} is not a lane's branch")
        lane_ref = f"refs/heads/{branch}"
        refs = [lane_ref]
        if run_id is not None:
            if not check_run_ref(run_id):
                raise InvalidNameError(f"invalid run id {run_id!r}: it names no run")
            refs.append(run_ref(run_id))
        tree, found = self._checkout(commit, name, tuple(refs), pool)
        if found != lane_ref:
            return tree, None, found is not None
        head = git(["rev-parse", "HEAD"], cwd=tree, what=f"read HEAD in {tree}").strip()
        return tree, head, True

    def _has_commit(self, commit: str) -> bool:
        found = subprocess.run(
            ["git", "cat-file", "-e", f"{commit}^{{commit}}"],
            cwd=self.mirror,
            capture_output=True,
        )
        return found.returncode == 0

    def _checkout(
        self, commit: str, name: str, refs: tuple[str, ...], pool: str | None
    ) -> tuple[Path, str | None]:
        """A worktree of the first of ``refs`` the origin has (fetched now), else of
        ``commit``; which ref it was (``None``: ``commit``)."""
        if not _SHA.match(commit):
            raise NotOnOriginError(
                f"{commit!r} is not a commit id; a worker checks out the commit the client's "
                "HEAD names"
            )
        self._lock.parent.mkdir(parents=True, exist_ok=True)
        self.worktrees.mkdir(parents=True, exist_ok=True)
        target = self.worktrees / name
        # One fetch or worktree change at a time in this mirror (runs start in parallel).
        with locks.exclusive(self._lock):
            # A new run's commit already here needs no fetch (a warm mirror: the origin
            # is asked only for what it lacks); a resumed run's ref may have moved on
            # the origin (pushed from another worker), so it is always fetched.
            if refs or not (self.mirror / "HEAD").exists() or not self._has_commit(commit):
                self._fetch()
            found = None
            for ref in refs:
                kept = subprocess.run(
                    ["git", "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}"],
                    cwd=self.mirror,
                    capture_output=True,
                    text=True,
                )
                if kept.returncode == 0:
                    commit, found = kept.stdout.strip(), ref
                    break
            if not self._has_commit(commit):
                raise NotOnOriginError(
                    f"commit {commit} is not on the origin {self.origin}; push it first "
                    "(git push), then run again"
                )
            if target.exists():  # a worktree left by a worker that died: start clean
                self._remove(target)
            if not (pool is not None and self._unpark(pool, target, commit)):
                git(
                    ["worktree", "add", "--detach", "--quiet", str(target), commit],
                    cwd=self.mirror,
                    what=f"check out {commit} in {target}",
                )
        return target, found

    def _unpark(self, pool: str, target: Path, commit: str) -> bool:
        """Move a worktree parked for ``pool`` to ``target`` at ``commit``, its tracked
        files as the commit has them and nothing else but its replica (``_KEPT``).
        False when none is parked (or the one found would not move cleanly: removed)."""
        folder = self.parked / pool
        if not folder.is_dir():
            return False
        for parked in sorted(folder.iterdir()):
            try:
                git(["worktree", "move", str(parked), str(target)], cwd=self.mirror, what="unpark")
            except GitError:
                self._remove(parked)
                continue
            try:
                git(
                    ["checkout", "--detach", "--force", "--quiet", commit],
                    cwd=target,
                    what=f"check out {commit} in {target}",
                )
                git(["clean", "-ffdxq", "-e", f"/{_KEPT}"], cwd=target, what=f"clean {target}")
            except GitError:
                self._remove(target)
                return False
            return True
        return False

    def park(self, checkout: Path, pool: str) -> None:
        """Keep the ended run's worktree warm for the next run of ``pool`` (its space),
        once its commits were kept; removed instead when ``PARK_MAX`` are parked."""
        with locks.exclusive(self._lock):
            folder = self.parked / pool
            folder.mkdir(parents=True, exist_ok=True)
            if len(list(folder.iterdir())) >= PARK_MAX:
                self._remove(checkout)
                return
            self._keep_transcripts(checkout)
            Layout(checkout).root.joinpath("given-snapshot.json").unlink(missing_ok=True)
            try:
                git(
                    ["worktree", "move", str(checkout), str(folder / checkout.name)],
                    cwd=self.mirror,
                    what=f"park {checkout}",
                )
            except GitError:
                self._remove(checkout)

    def keep(self, checkout: Path, run_id: str) -> bool:
        """Push the checkout's HEAD to ``refs/flowdrop/runs/<run>`` on the origin.
        False when there was nothing to push (the ref already names HEAD)."""
        if not check_run_ref(run_id):
            raise InvalidNameError(f"invalid run id {run_id!r}: it names no run to keep")
        head = git(["rev-parse", "HEAD"], cwd=checkout, what=f"read HEAD in {checkout}").strip()
        ref = run_ref(run_id)
        known = subprocess.run(
            ["git", "rev-parse", "--verify", "--quiet", ref],
            cwd=self.mirror,
            capture_output=True,
            text=True,
        )
        if known.returncode == 0 and known.stdout.strip() == head:
            return False
        # To the origin's URL, not the mirror's remote: a mirror remote takes no refspec.
        git(
            ["push", "--quiet", self.origin, f"+{head}:{ref}"],
            cwd=checkout,
            what=f"push run {run_id}'s commits to {self.origin}",
        )
        with contextlib.suppress(GitError):  # only a cache of what was pushed
            git(["update-ref", ref, head], cwd=self.mirror, what="note the pushed ref")
        return True

    def release(self, checkout: Path) -> None:
        """Remove the run's worktree (its commits were kept first)."""
        with locks.exclusive(self._lock):
            self._remove(checkout)

    def _remove(self, checkout: Path) -> None:
        self._keep_transcripts(checkout)
        with contextlib.suppress(GitError):
            git(
                ["worktree", "remove", "--force", "--force", str(checkout)],
                cwd=self.mirror,
                what=f"remove the worktree {checkout}",
            )
        shutil.rmtree(checkout, ignore_errors=True)
        with contextlib.suppress(GitError):
            git(["worktree", "prune"], cwd=self.mirror, what="prune worktrees")

    def _keep_transcripts(self, checkout: Path) -> None:
        """Move what flowdrop wrote as transcripts in the worktree (the ``command``
        backend's output) into ``<home>/transcripts/`` before the worktree goes: a
        remote run's transcripts live on its worker, never deleted with the tree."""
        made = Layout(checkout).transcripts
        if made.is_symlink() or not made.is_dir():
            return
        kept = self.home / "transcripts"
        for entry in made.iterdir():
            if entry.is_file() and not entry.is_symlink():
                kept.mkdir(parents=True, exist_ok=True)
                with contextlib.suppress(OSError):
                    shutil.move(str(entry), str(kept / entry.name))


def _kill_runs_in(tree: Path, *, wait: float = 10.0) -> None:
    """A run child outlives its worker (it leads its own session), so one may still be
    going in a worktree being swept. It is killed first, between two of its writes
    (everything it saw saved is in PostgreSQL), never left running in a deleted folder:
    its saves would fail with a warning and the flow carry on, so key sets it saw
    return would never reach PostgreSQL (found by the worker kill harness)."""
    for lock in (tree / ".flowdrop" / "runs").glob("*/live.lock"):
        pid = locks.holder_pid(lock)
        if pid is None:
            continue
        process.kill_group(pid)
        deadline = time.monotonic() + wait
        while locks.holder_pid(lock) is not None and time.monotonic() < deadline:
            time.sleep(0.02)


def sweep(home: Path) -> list[Path]:
    """Remove the worktrees a worker that died in ``home`` left behind (and the git
    metadata naming them), and every parked one; call only while holding the home.
    The run worktrees removed."""
    removed = []
    trees = home / "worktrees"
    if trees.is_dir():
        for entry in sorted(trees.iterdir()):
            _kill_runs_in(entry)
            shutil.rmtree(entry, ignore_errors=True)
            removed.append(entry)
    # Parked worktrees of a worker that died: their replicas may have lost writes a
    # power cut caught unsynced (docs/remote.md, "Durability"), so none is reused.
    parked = home / "parked"
    if parked.is_dir():
        for pool in sorted(parked.glob("*/*")):
            for entry in sorted(pool.iterdir()):
                shutil.rmtree(entry, ignore_errors=True)  # not said: a clean stop parks too
    mirrors = home / "mirrors"
    if mirrors.is_dir():
        for mirror in sorted(mirrors.glob("*.git")):
            with contextlib.suppress(GitError):
                git(["worktree", "prune"], cwd=mirror, what=f"prune worktrees of {mirror}")
    return removed
