"""Short-lived gitpython reads: open ``Repo`` in a ``with``, read, close.

gitpython's own documentation warns that a long-lived ``Repo`` leaks in
long-running processes, so nothing here keeps one. Every function answers
``None`` outside a git repository rather than raising.

A long-running caller (the UI) goes one step further with ``isolated``: the read
runs in a short-lived child process, so gitpython is never imported into it —
importing it costs about 10 MiB resident (measured by ``bench/ui_bench.py``), and
whatever it would leak goes away with the child.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import re
import shutil
import stat as stat_module
import subprocess
import sys
import tempfile
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import orjson

from flowdrop_tui.core.child_read import child_output, never
from flowdrop_tui.core.times import parse_time

_SHA = re.compile(r"^[0-9a-f]{7,64}$")
# A run on a remote worker has its commits pushed to RUN_REFS/<run> on the origin, and
# every reading machine fetches them there (docs/remote.md): only the run's own commits.
RUN_REFS = "refs/flowdrop/runs"
# A remote worker runs each run in a detached worktree of the commit the client asked
# for; it sets this in the run child's env to the branch the client was on, so the run
# records that branch (as a local run in the client's workspace would) rather than none.
# Honoured only while HEAD is detached: a run that checks out a branch records that.
BRANCH_ENV = "FLOWDROP_GIT_BRANCH"


def run_ref(run_id: str) -> str:
    """The ref a remote run's commits are kept at on the origin (and fetched to)."""
    return f"{RUN_REFS}/{run_id}"


def facts(workspace: Path) -> dict[str, Any] | None:
    """HEAD commit, branch and dirty flag, or ``None`` outside git. A detached HEAD
    has branch ``None``, or ``BRANCH_ENV``'s when set (a run on a remote worker)."""
    try:
        import git
    except ImportError:  # pragma: no cover - a declared dependency
        return None
    try:
        with git.Repo(workspace) as repo:
            try:
                head: str | None = repo.head.commit.hexsha
            except ValueError:  # a repository with no commits yet
                head = None
            if repo.head.is_detached:
                branch = os.environ.get(BRANCH_ENV) or None
            else:
                branch = repo.active_branch.name
            dirty = repo.is_dirty(untracked_files=True)
            return {"head": head, "branch": branch, "dirty": bool(dirty)}
    except Exception:  # not a repository, or git itself failed: no git facts
        return None


def _is_sha(value: object) -> bool:
    return isinstance(value, str) and _SHA.match(value) is not None


def commits_between(
    workspace: Path, start: str | None, end: str | None, *, until: str | None = None
) -> list[dict[str, Any]]:
    """Commits reachable from ``end`` but not from ``start``, oldest first.

    ``start`` (and a finished run's ``end``) are read from a record, so only commit
    ids are passed on to git: a forged ``--output=…`` or ``--all`` is no revision.
    ``until`` (ISO-8601): leave out commits made after it — for a run that
    recorded no end, so later commits by others are not counted as its own.
    """
    if not _is_sha(end) or (start is not None and not _is_sha(start)):
        return []
    limit = _until(until)
    try:
        import git

        with git.Repo(workspace) as repo:
            spec = f"{start}..{end}" if start else end
            found = [
                {
                    "sha": commit.hexsha,
                    "summary": commit.summary,
                    "author": commit.author.name,
                    "time": commit.committed_datetime.isoformat(),
                }
                for commit in repo.iter_commits(spec)
                if limit is None or commit.committed_datetime <= limit
            ]
    except Exception:
        return []
    found.reverse()
    return found


def _until(text: str | None) -> datetime | None:
    parsed = parse_time(text)
    if parsed is None:
        return None
    # Commit times have whole seconds: count the second the last event fell in.
    return parsed.replace(microsecond=0) + timedelta(seconds=1)


def head(workspace: Path) -> str | None:
    try:
        import git

        with git.Repo(workspace) as repo:
            return str(repo.head.commit.hexsha)
    except Exception:
        return None


def run_end(workspace: Path, run_id: str | None) -> tuple[str | None, bool]:
    """Where a run that recorded no end stands now: the commit its worker pushed to
    ``RUN_REFS/<run>`` (``True``: only the run's own commits are there), else HEAD."""
    try:
        import git

        with git.Repo(workspace) as repo:
            if run_id is not None:
                try:
                    return str(repo.commit(run_ref(run_id)).hexsha), True
                except Exception:  # no such ref: a local run
                    pass
            return str(repo.head.commit.hexsha), False
    except Exception:
        return None, False


# SPEC §20: what a round moved, read with git's own machinery (one ``git status``
# over the index's stat data, never a walk of every file in Python). No optional
# locks: the run only looks, and never takes index.lock from under its agent.
_STATUS = (
    "git",
    "--no-optional-locks",
    "-c",
    "status.renames=false",
    "-c",
    "core.quotePath=false",
    "status",
    "--porcelain=v2",
    "-z",
    "--branch",
    "--no-ahead-behind",  # an upstream's distance is not asked for, nor paid for
    "--untracked-files=all",
)
_HASHED_MAX = 1 << 20  # a changed file up to 1 MiB is hashed; a bigger one by its stat
EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"  # git's tree of nothing


def _git(workspace: Path, *args: str, check: bool = True) -> bytes | None:
    """A git command's stdout, or ``None`` when it failed (``check``) or could not run."""
    try:
        done = subprocess.run(
            ["git", *args],
            cwd=workspace,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=120,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if check and done.returncode != 0:
        return None
    return done.stdout


def is_repository(workspace: Path) -> bool:
    """Whether ``workspace`` is inside a git working tree."""
    out = _git(workspace, "rev-parse", "--is-inside-work-tree")
    return out is not None and out.strip() == b"true"


@functools.lru_cache(maxsize=16)
def _git_dirs(workspace: Path) -> tuple[Path, Path] | None:
    """The repository's git folder and common folder (a linked worktree has both)."""
    out = _git(workspace, "rev-parse", "--path-format=absolute", "--git-dir", "--git-common-dir")
    lines = out.decode(errors="replace").splitlines() if out else []
    return (Path(lines[0]), Path(lines[1])) if len(lines) == 2 else None


@functools.lru_cache(maxsize=16)
def toplevel(workspace: Path) -> Path | None:
    """The repository's top folder: git's paths (status, diff) are relative to it."""
    out = _git(workspace, "rev-parse", "--show-toplevel")
    text = out.decode(errors="replace").strip() if out else ""
    return Path(text) if text else None


def _head_from_files(workspace: Path) -> str | None:
    """HEAD read as git keeps it — ``HEAD``, a loose ref, ``packed-refs`` — without a
    process (about 2 ms less a round); ``None`` when it is not that simple (a reftable,
    a symbolic ref to a ref not written yet): then git answers."""
    dirs = _git_dirs(workspace)
    if dirs is None:
        return None
    git_dir, common = dirs
    try:
        head = (git_dir / "HEAD").read_text(errors="replace").strip()
        if _is_sha(head):
            return head
        if not head.startswith("ref: refs/"):
            return None
        ref = head[len("ref: ") :]
        for folder in (git_dir, common):
            try:
                found = (folder / ref).read_text(errors="replace").strip()
            except (FileNotFoundError, NotADirectoryError):
                continue
            return found if _is_sha(found) else None
        with open(common / "packed-refs", errors="replace") as packed:
            for line in packed:
                sha, _, name = line.strip().partition(" ")
                if name == ref and _is_sha(sha):
                    return sha
    except OSError:
        return None
    return None


def head_now(workspace: Path) -> str | None:
    """HEAD's commit (``None``: no commit yet, or not a repository): a round's start."""
    found = _head_from_files(workspace)
    if found is not None:
        return found
    out = _git(workspace, "rev-parse", "--verify", "-q", "HEAD^{commit}")
    text = out.decode().strip() if out else ""
    return text if _is_sha(text) else None


PATHS_KEPT = 100  # a round's end keeps each differing file's digest, up to this many
# SPEC §20: a changed file over this size is not read into a round's snapshot or a diff's
# patch (a 1 GB untracked file took diff 24 s): it is named as skipped instead.
BIG_FILE = 8 << 20

Worktree = tuple[str | None, str, dict[str, str] | None]


@dataclass
class Scan:
    """One ``git status`` read: HEAD, the tree's digest, each differing file's digest
    (``None`` past ``PATHS_KEPT``), and the paths a snapshot takes (``changed``) or
    leaves as they are in the index because they are too big (``skipped``)."""

    head: str | None
    tree: str
    paths: dict[str, str] | None
    changed: list[bytes] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)


def worktree(workspace: Path) -> Worktree | None:
    """HEAD and a digest of the working tree — tracked and untracked files, ignored ones
    excepted — or ``None`` outside git. ``git status`` says which files differ from
    HEAD (and the index); only those are read: hashed up to 1 MiB, by size and time
    above. Two trees with the same digest hold the same files as far as git sees.
    Third: each file that differs from HEAD and its own digest (``None`` past
    ``PATHS_KEPT`` of them): what ``diff`` tells a round's own changes by."""
    return worktree_read(workspace, worktree_begin(workspace))


def worktree_begin(workspace: Path) -> subprocess.Popen[bytes] | None:
    """Start ``worktree``'s ``git status``, so the caller can do something else (save the
    state) while git works; ``worktree_read`` takes its answer."""
    try:
        return subprocess.Popen(
            _STATUS,
            cwd=workspace,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
    except OSError:
        return None


def worktree_read(workspace: Path, status: subprocess.Popen[bytes] | None) -> Worktree | None:
    scan = worktree_scan(workspace, status)
    return None if scan is None else (scan.head, scan.tree, scan.paths)


def worktree_scan(workspace: Path, status: subprocess.Popen[bytes] | None) -> Scan | None:
    """``worktree_begin``'s answer read: see ``Scan``."""
    if status is None:
        return None
    try:
        out, _ = status.communicate(timeout=120)
    except subprocess.SubprocessError:
        status.kill()
        status.wait()
        return None
    if status.returncode != 0:
        return None
    head: str | None = None
    digest = hashlib.sha256()
    top = toplevel(workspace) or workspace
    paths: dict[str, str] | None = {}
    changed: list[bytes] = []
    skipped: list[str] = []
    records = out.split(b"\0")
    skip = False
    for record in records:
        if skip:  # a rename's original path (renames are off; kept for safety)
            skip = False
            digest.update(record + b"\0")
            continue
        if record.startswith(b"# branch.oid "):
            oid = record[len(b"# branch.oid ") :].decode(errors="replace")
            head = oid if _is_sha(oid) else None
            continue
        if not record or record.startswith(b"#"):
            continue
        one = hashlib.sha256(record + b"\0")
        kind = record[:1]
        if kind == b"2":
            skip = True
        path = _status_path(record)
        big = False
        if path is not None and (kind == b"?" or record[3:4] not in (b".", b"D")):
            content = _content(top / os.fsdecode(path))
            big = content.startswith(b"big:") and int(content.split(b":")[1]) > BIG_FILE
            one.update(content)
        digest.update(one.digest())
        if path is not None:
            if big:
                skipped.append(os.fsdecode(path))
            elif not path.endswith(b"/"):  # a nested repository: left as the index has it
                changed.append(path)
            if paths is not None:
                paths[os.fsdecode(path)] = one.hexdigest()[:12]
                if len(paths) > PATHS_KEPT:
                    paths = None
    return Scan(head, digest.hexdigest()[:32], paths, changed, skipped)


# The temporary index a snapshot is made in: never the user's. Split index, fsmonitor
# and the untracked cache off, so nothing is written beside the user's index either. No
# fsync of the objects: a snapshot is a convenience (a power cut that loses one leaves
# that round's diff to its commits), and a sync per object was most of its cost.
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
    weeks by default). Files over ``BIG_FILE`` stay as the index has them."""

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

    def take(self, scan: Scan) -> str | None:
        """The tree ``scan`` saw, as a tree object; ``None`` when git failed."""
        dirs = _git_dirs(self.workspace)
        top = toplevel(self.workspace)
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
        return found if tree.returncode == 0 and _is_sha(found) else None


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


def tree_of(workspace: Path, commit: str | None) -> str | None:
    """A commit's tree id (``None``: no commit, or git does not have it)."""
    if commit is None or not _is_sha(commit):
        return EMPTY_TREE if commit is None else None
    out = _git(workspace, "rev-parse", "--verify", "-q", f"{commit}^{{tree}}")
    text = out.decode().strip() if out else ""
    return text if _is_sha(text) else None


def _status_path(record: bytes) -> bytes | None:
    """The path of a porcelain-v2 record: after 8 fields (1), 9 (2), 10 (u), 1 (?)."""
    fields = {b"1": 8, b"2": 9, b"u": 10, b"?": 1}.get(record[:1])
    if fields is None:
        return None
    parts = record.split(b" ", fields)
    return parts[fields] if len(parts) > fields else None


def _content(path: Path) -> bytes:
    """What a changed file holds, as bytes to digest: its content's hash, a link's
    target, a big file's size and time, a folder's name only."""
    try:
        info = os.lstat(path)
        if stat_module.S_ISLNK(info.st_mode):
            return b"link:" + os.fsencode(os.readlink(path))
        if not stat_module.S_ISREG(info.st_mode):
            return b"other"
        if info.st_size > _HASHED_MAX:
            return f"big:{info.st_size}:{info.st_mtime_ns}:{info.st_mode}".encode()
        with open(path, "rb") as handle:
            return hashlib.sha256(handle.read()).digest() + f":{info.st_mode}".encode()
    except OSError:
        return b"gone"


def diff_between(
    workspace: Path, start: str | None, end: str | None, only: set[str] | None = None
) -> tuple[list[dict[str, str]], str, list[str]] | None:
    """Files, patch and the files left out of the patch (untracked ones over
    ``BIG_FILE``: never read), from commit or tree ``start`` to commit or tree ``end``
    (``None``: the working tree, untracked files included; a ``start`` of ``None``: the
    empty tree), of the files ``only`` names when given (paths from the repository's
    top). Only object ids reach git (they are read from a record). ``None`` when git
    failed. A file over ``BIG_FILE`` is binary to git here: no patch text is made."""
    base = start if start is not None and _is_sha(start) else EMPTY_TREE
    if end is not None and not _is_sha(end):
        return None
    workspace = toplevel(workspace) or workspace
    span: list[str] = [base, end] if end is not None else [base]
    if only is not None:
        if not only:
            return [], "", []
        span += ["--", *(f":(literal){path}" for path in sorted(only))]
    else:
        span.append("--")
    big = ("-c", f"core.bigFileThreshold={BIG_FILE}")
    names = _git(workspace, *big, "diff", "--no-renames", "--name-status", "-z", *span)
    patch = _git(workspace, *big, "diff", "--no-renames", "--no-color", "--no-ext-diff", *span)
    if names is None or patch is None:
        return None
    parts = names.split(b"\0")
    files = [
        {"path": os.fsdecode(parts[i + 1]), "status": _STATUS_WORDS.get(parts[i][:1], "changed")}
        for i in range(0, len(parts) - 1, 2)
        if parts[i]
    ]
    text = patch.decode(errors="replace")
    skipped: list[str] = []
    if end is None:
        untracked = _git(workspace, "ls-files", "--others", "--exclude-standard", "-z")
        for raw in (untracked or b"").split(b"\0"):
            if not raw or (only is not None and os.fsdecode(raw) not in only):
                continue
            files.append({"path": os.fsdecode(raw), "status": "untracked"})
            try:
                size = os.lstat(workspace / os.fsdecode(raw)).st_size
            except OSError:
                continue
            if size > BIG_FILE:  # named, never read
                skipped.append(os.fsdecode(raw))
                continue
            one = _git(
                workspace,
                "diff",
                "--no-color",
                "--no-index",
                "--",
                "/dev/null",
                os.fsdecode(raw),
                check=False,
            )
            text += (one or b"").decode(errors="replace")
    files.sort(key=lambda row: row["path"])
    return files, text, skipped


_STATUS_WORDS = {
    b"A": "added",
    b"M": "modified",
    b"D": "deleted",
    b"T": "type changed",
    b"U": "unmerged",
}


def isolated(workspace: Path, read: str, *args: str, cancelled: Callable[[], bool] = never) -> Any:
    """``facts`` (no args) or ``commits`` (START END [UNTIL [RUN]], ``""`` for none; END may
    be ``HEAD``: the run's pushed ref when there is one, as ``run_end`` reads it) in a child
    process; the same answer the in-process read gives, ``None`` on failure or once
    ``cancelled()`` (the child killed: the UI's quit never waits for git)."""
    command = [sys.executable, "-m", "flowdrop_tui.core.git", read, str(workspace), *args]
    try:
        return orjson.loads(child_output(command, timeout=60, cancelled=cancelled) or b"")
    except orjson.JSONDecodeError:
        return None


def _main(argv: list[str]) -> int:
    read, workspace, *args = argv
    where = Path(workspace)
    answer: Any = None
    if read == "facts":
        answer = facts(where)
    elif read == "commits":
        start, end, until, run = (*args, "", "", "", "")[:4]
        if end == "HEAD":
            found, pushed = run_end(where, run or None)
            end, until = found or "", "" if pushed else until
        answer = commits_between(where, start or None, end or None, until=until or None)
    sys.stdout.buffer.write(orjson.dumps(answer, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
