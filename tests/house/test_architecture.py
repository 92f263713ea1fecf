"""The floor plan holds: each layer imports only the layers below it (docs/architecture.md)."""

from __future__ import annotations

import ast
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


def test_every_module_of_the_package_is_under_a_contract() -> None:
    """Guards against a module beside the layers that no contract holds (as
    ``warm_run.py``, an entry point importing remote mode directly, was): each
    top-level module and package of ``flowdrop_tui`` is a layer of the faces'
    contract, or a contract's own subject (``langgraph``, the API's ``__init__``)."""
    import tomllib

    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    named: set[str] = set()
    for contract in config["contracts"]:
        held = ("layers", "source_modules", "forbidden_modules")
        for entry in [e for field in held for e in contract.get(field, [])]:
            named.update(part.strip() for part in entry.split("|"))
    top = {
        f"flowdrop_tui.{p.stem if p.is_file() else p.name}"
        for p in PACKAGE.iterdir()
        if (p.suffix == ".py" and p.name != "__init__.py")
        or (p.is_dir() and (p / "__init__.py").exists())
    }
    assert "flowdrop_tui.warm_run" in top  # the walk sees the top-level modules
    assert sorted(top - named) == []


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


MAX_CLASS_LINES = 300


def _class_lengths() -> list[tuple[str, int]]:
    """Every class in the package (nested ones too) as ``module::Name`` and its lines,
    decorators left out: ``end_lineno - lineno + 1``."""
    found = []
    for path in _modules() + sorted(PACKAGE.rglob("__init__.py")):
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                assert node.end_lineno is not None
                where = f"{path.relative_to(PACKAGE)}::{node.name}"
                found.append((where, node.end_lineno - node.lineno + 1))
    return found


def test_no_class_is_too_long_to_hold_one_job() -> None:
    """Guards against a class growing past one job (STYLE.md, 16): split it by what a
    reader comes to change, as the run keys were into launching and stopping."""
    long = {where: lines for where, lines in _class_lengths() if lines > MAX_CLASS_LINES}
    assert not long, f"over {MAX_CLASS_LINES} lines, split by what each does: {long}"
