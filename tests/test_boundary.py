"""The core never imports Textual or Rich: a flow must not pay for the UI."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import flowdrop_tui

CORE = Path(flowdrop_tui.__file__).parent / "core"


def core_modules() -> list[str]:
    names = []
    for path in sorted(CORE.rglob("*.py")):
        parts = path.relative_to(CORE.parent.parent).with_suffix("").parts
        names.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return names


def test_importing_every_core_module_loads_no_ui_library() -> None:
    """Guards against a core module (or the public API) pulling in textual or rich."""
    modules = core_modules()
    assert "flowdrop_tui.core.run.execution" in modules  # the walk finds the subpackages
    code = (
        "import importlib, sys, flowdrop_tui, flowdrop_tui.cli\n"
        f"for name in {modules!r}:\n"
        "    importlib.import_module(name)\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('textual', 'rich'))\n"
        "print(','.join(bad))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == ""
