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

import os
import re
import subprocess
import sys
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import orjson

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


def isolated(workspace: Path, read: str, *args: str) -> Any:
    """``facts`` (no args) or ``commits`` (START END [UNTIL [RUN]], ``""`` for none; END may
    be ``HEAD``: the run's pushed ref when there is one, as ``run_end`` reads it) in a child
    process; the same answer the in-process read gives, ``None`` on failure."""
    command = [sys.executable, "-m", "flowdrop_tui.core.git", read, str(workspace), *args]
    try:
        done = subprocess.run(
            command, stdin=subprocess.DEVNULL, capture_output=True, timeout=60, check=False
        )
        return orjson.loads(done.stdout)
    except (OSError, subprocess.SubprocessError, orjson.JSONDecodeError):
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
