"""The fast tier holds in-process tests only (docs/architecture.md, "Tests"): a test
here that starts the command as a child (``python -m flowdrop_tui …``) fails at once,
saying where it belongs. Describing a flow in its own child, as every start does, is
allowed: that is the product's way, and it is cached per flow."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from typing import Any

import pytest

_popen_init = subprocess.Popen.__init__


def _in_process_only(self: subprocess.Popen[Any], args: Any, *rest: Any, **kwargs: Any) -> None:
    argv = [str(arg) for arg in args] if isinstance(args, list | tuple) else [str(args)]
    if "flowdrop_tui" in argv and argv[argv.index("flowdrop_tui") - 1] == "-m":
        raise AssertionError(
            f"tests/unit is the in-process tier, but this test started {' '.join(argv)}: "
            "call the core (or cli.main) here, or move the test to the full suite"
        )
    _popen_init(self, args, *rest, **kwargs)


@pytest.fixture(autouse=True)
def _no_command_children(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(subprocess.Popen, "__init__", _in_process_only)
    yield
