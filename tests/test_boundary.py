"""The core never imports Textual or Rich: a flow must not pay for the UI."""

from __future__ import annotations

import os
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


REMOTE_LIBRARIES = ("psycopg", "psycopg_binary", "psycopg_pool", "temporalio")


def test_local_flows_imports_no_remote_library(workspace: Path) -> None:
    """Guards local mode against paying for remote mode: ``flows`` in a workspace with no
    ``[remote]`` config answers without importing psycopg or temporalio."""
    (workspace / "flows" / "hello").mkdir()
    (workspace / "flows" / "hello" / "flow.py").write_text(
        "from flowdrop_tui import flow\n\n@flow\ndef hello(run):\n    pass\n"
    )
    code = (
        "import sys, io, contextlib\n"
        "from flowdrop_tui import cli\n"
        "out = io.StringIO()\n"
        "with contextlib.redirect_stdout(out):\n"
        f"    code = cli.main(['flows', '--json', '--workspace', {str(workspace)!r}])\n"
        "assert code == 0, (code, out.getvalue())\n"
        "assert '\"hello\"' in out.getvalue(), out.getvalue()\n"
        f"bad = sorted(m for m in sys.modules if m.split('.')[0] in {REMOTE_LIBRARIES!r})\n"
        "print(','.join(bad))\n"
    )
    env = {
        k: v for k, v in os.environ.items() if not k.startswith("FLOWDROP_")
    }  # no remote mode from the environment either
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env
    )
    assert done.stdout.strip() == ""
