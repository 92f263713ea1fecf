"""The fast tier keeps itself in-process (tests/unit/conftest.py)."""

from __future__ import annotations

import subprocess
import sys

import pytest


def test_a_command_child_is_refused_naming_the_tier() -> None:
    """Guards the tier's one rule: ``python -m flowdrop_tui`` as a child fails the test."""
    with pytest.raises(AssertionError, match="tests/unit is the in-process tier"):
        subprocess.run([sys.executable, "-m", "flowdrop_tui", "--help"], check=False)


def test_other_children_still_start() -> None:
    """Guards the rule's reach: git, and a flow's describe child, are not the command."""
    done = subprocess.run(["git", "--version"], capture_output=True, text=True, check=True)
    assert done.stdout.startswith("git version")
