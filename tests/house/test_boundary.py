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


def test_local_mode_never_imports_the_remote_drivers(tmp_path: Path) -> None:
    """Guards local mode's cost: `flows --json` and a whole `run` with no remote config
    load no module of `core.remote` (its config included: the seam reads it only when
    something could configure it), nor psycopg nor temporalio (SPEC §18: local mode
    does not change at all)."""
    ws = tmp_path / "ws"
    (ws / "flows" / "one").mkdir(parents=True)
    (ws / "flows" / "one" / "flow.py").write_text(
        "from flowdrop_tui import flow\n\n"
        "@flow(resumable=True)\n"
        "def main(run):\n"
        "    for r in run.rounds(range(2)):\n"
        "        run.state['n'] = r\n"
    )
    code = (
        "import sys\n"
        "from flowdrop_tui import cli\n"
        "for argv in (['flows', '--json'], ['run', 'one']):\n"
        "    assert cli.main(argv) == 0, argv\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('psycopg', 'temporalio')"
        " or m.startswith('flowdrop_tui.core.remote'))\n"
        "print('LOADED', ','.join(bad))\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLOWDROP_")}
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ws, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "LOADED"
