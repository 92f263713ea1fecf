"""The real Claude Code and Codex CLIs, installed from npm once into a cache folder.

``python -m tests.agents_mock.install`` installs them (``.ci/run`` does, before
the tests); the test fixture calls :func:`ensure_installed` too, under a file
lock, so pytest-xdist workers never race one another or a second checkout.

The cache is ``$FLOWDROP_TEST_CACHE`` (default ``~/.cache/flowdrop-tui-tests``)
``/npm/claude-code-<v>+codex-<v>/``: one folder per pair of pinned versions, so
moving a pin installs beside the old one and never half over it.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
from pathlib import Path

# Pinned: docs/sessions.md records what these versions do, as verified by hand.
CLAUDE_CODE = "2.1.332"
CODEX = "0.171.0"
PACKAGES = (f"@anthropic-ai/claude-code@{CLAUDE_CODE}", f"@openai/codex@{CODEX}")


class NotInstallable(Exception):
    """node or npm is missing: the real-client tests cannot run here."""


def cache_root() -> Path:
    value = os.environ.get("FLOWDROP_TEST_CACHE")
    return Path(value) if value else Path.home() / ".cache" / "flowdrop-tui-tests"


def prefix() -> Path:
    return cache_root() / "npm" / f"claude-code-{CLAUDE_CODE}+codex-{CODEX}"


def bin_dir() -> Path:
    return prefix() / "node_modules" / ".bin"


def _version(executable: Path) -> str | None:
    try:
        done = subprocess.run(
            [str(executable), "--version"],
            capture_output=True,
            text=True,
            timeout=60,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def _complete() -> bool:
    claude = _version(bin_dir() / "claude") or ""
    codex = _version(bin_dir() / "codex") or ""
    return claude.startswith(CLAUDE_CODE) and codex.endswith(CODEX)


def ensure_installed() -> Path:
    """The folder holding ``claude`` and ``codex``, installing them on first use."""
    if shutil.which("node") is None:  # Codex's launcher is a Node script
        raise NotInstallable(
            "node is needed to run the real Codex CLI, and npm to install it and Claude "
            "Code (apt-get install nodejs npm; .ci/run does it)"
        )
    if _complete():
        return bin_dir()
    npm = shutil.which("npm")
    if npm is None:
        raise NotInstallable(
            "npm is needed to install the real Claude Code and Codex CLIs "
            "(apt-get install npm; .ci/run does it)"
        )
    where = prefix()
    where.mkdir(parents=True, exist_ok=True)
    with open(where.parent / f"{where.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if _complete():
            return bin_dir()
        subprocess.run(
            [
                npm,
                "install",
                "--no-audit",
                "--no-fund",
                "--no-save",
                "--prefix",
                str(where),
                *PACKAGES,
            ],
            check=True,
            stdin=subprocess.DEVNULL,
            stdout=sys.stderr,
        )
        if not _complete():
            # npm may skip install scripts: Claude Code's postinstall puts the native
            # binary in place of its bin/claude.exe placeholder. Run it ourselves.
            package = where / "node_modules" / "@anthropic-ai" / "claude-code"
            subprocess.run(
                ["node", "install.cjs"], cwd=package, check=True, stdin=subprocess.DEVNULL
            )
        if not _complete():
            raise RuntimeError(
                f"installed {' '.join(PACKAGES)} into {where}, but `claude --version` / "
                f"`codex --version` do not answer {CLAUDE_CODE} / {CODEX}"
            )
        return bin_dir()


if __name__ == "__main__":
    print(ensure_installed())
