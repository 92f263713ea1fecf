"""A bare git origin in tmp and a client clone of it: what remote runs check out."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

GIT_ENV = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@t",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@t",
}


def git(cwd: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", *args],
        cwd=cwd,
        env={**os.environ, **GIT_ENV},
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip()


def make_origin(tmp: Path) -> tuple[Path, Path]:
    """A bare origin and a clone of it (``main`` with one commit holding ``flows/``)."""
    origin = tmp / "origin.git"
    git(tmp, "init", "-q", "--bare", "-b", "main", str(origin))
    clone = tmp / "client"
    git(tmp, "clone", "-q", str(origin), str(clone))
    git(clone, "checkout", "-q", "-b", "main")
    (clone / "flows").mkdir()
    (clone / "flows" / ".keep").write_text("")
    git(clone, "add", "-A")
    git(clone, "commit", "-q", "-m", "init")
    git(clone, "push", "-q", "origin", "main")
    return origin, clone


def commit_all(clone: Path, message: str, *, push: bool = True) -> str:
    git(clone, "add", "-A")
    git(clone, "commit", "-q", "-m", message)
    if push:
        git(clone, "push", "-q", "origin", "HEAD:main")
    return git(clone, "rev-parse", "HEAD")
