"""The floor plan holds: each layer imports only the layers below it (docs/architecture.md)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_import_contracts_are_kept() -> None:
    """Guards against an import that runs back up a layer, type-only imports included
    (the contracts are in pyproject.toml, ``[tool.importlinter]``)."""
    lint = shutil.which("lint-imports", path=str(Path(sys.executable).parent))
    assert lint, "import-linter is part of the test extras"
    done = subprocess.run(
        [lint, "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "BROKEN" not in done.stdout


PACKAGE = ROOT / "flowdrop_tui"
MAX_LINES = 600


def _modules() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if p.name != "__init__.py")


def test_no_two_modules_share_a_name() -> None:
    """Guards against two modules with one name (``errors.py`` in the core and the UI):
    a reader meets one and thinks of the other, and an importer of both needs an alias."""
    seen: dict[str, list[str]] = {}
    for path in _modules():
        seen.setdefault(path.name, []).append(str(path.relative_to(PACKAGE)))
    shared = {name: paths for name, paths in seen.items() if len(paths) > 1}
    assert not shared, shared


def test_no_module_is_too_long_to_read() -> None:
    """Guards against a module growing past what one reading holds: split it by what
    lives there (as ``records/events.py`` was, into the event log, its lines and the fold)."""
    long = {
        str(path.relative_to(PACKAGE)): lines
        for path in _modules()
        if (lines := len(path.read_text().splitlines())) > MAX_LINES
    }
    assert not long, long
