"""The map of the code (docs/architecture.md) names only files that exist, lists every
module of the package, and its layer block names every layer the import contracts do.

A path in the map is relative to flowdrop_tui/ (`core/mode.py`) or to the repository
(`tests/house/`); a row of the module table may name more files of one folder
(`core/sessions/command.py`, `claude.py`, `codex.py`).
"""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "flowdrop_tui"
MAP = ROOT / "docs" / "architecture.md"

PATH = re.compile(
    r"`((?:core|tui|cli|serve|langgraph|tests|docs|bench|flows|flowdrop_tui|\.ci)/"
    r"[\w./-]*)`"
)
TICKED = re.compile(r"`([^`]+)`")


def _text() -> str:
    return MAP.read_text(encoding="utf-8")


def _section(heading: str) -> str:
    return _text().split(f"\n## {heading}\n", 1)[1].split("\n## ", 1)[0]


def _exists(path: str) -> bool:
    return (PACKAGE / path).exists() or (ROOT / path).exists()


def _table_files() -> set[str]:
    """The files the module table's first column names, relative to flowdrop_tui/."""
    named: set[str] = set()
    for line in _section("One line per module").splitlines():
        if not line.startswith("| `"):
            continue
        folder = ""
        for name in TICKED.findall(line.split("|")[1]):
            if "/" in name:
                folder = name.rsplit("/", 1)[0] + "/"
                named.add(name)
            else:
                named.add(folder + name)
    return named


def _modules() -> set[str]:
    """Every module of the package; an `__init__.py` that holds only a docstring is
    its folder's, which the layer block describes."""
    found: set[str] = set()
    for path in PACKAGE.rglob("*.py"):
        if "__pycache__" in path.parts:
            continue
        if path.name == "__init__.py":
            body = ast.parse(path.read_text(encoding="utf-8")).body
            if all(isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant) for n in body):
                continue
        found.add(path.relative_to(PACKAGE).as_posix())
    return found


def test_every_path_the_map_names_exists() -> None:
    """Guards against a map that sends a reader to a file that moved or went."""
    named = set(PATH.findall(_text()))
    assert len(named) > 150, "the scan found the map's paths"
    missing = sorted(p for p in named if not _exists(p))
    assert not missing, "docs/architecture.md names files that do not exist:\n" + "\n".join(missing)


def test_every_file_on_a_reader_path_exists() -> None:
    """Guards the paths' steps in particular: each numbered step opens a file."""
    steps = [
        path
        for line in _section("Five paths").splitlines()
        if re.match(r"\s*\d+\. `", line)
        for path in PATH.findall(line)
    ]
    assert len(steps) > 40, "the scan found the paths' steps"
    missing = sorted({p for p in steps if not _exists(p)})
    assert not missing, "a reader path opens a file that does not exist:\n" + "\n".join(missing)


def test_the_module_table_lists_every_module_and_no_module_that_is_gone() -> None:
    """Guards against a module added without its line in the map, or a line kept for a
    module that moved."""
    listed = _table_files()
    modules = _modules()
    assert not modules - listed, "modules without a line in the map:\n" + "\n".join(
        sorted(modules - listed)
    )
    gone = sorted(name for name in listed if not (PACKAGE / name).is_file())
    assert not gone, "the map lists files that are gone:\n" + "\n".join(gone)


def test_the_layer_block_names_every_layer_the_import_contracts_name() -> None:
    """Guards the block at the top of the map against a layer the contracts hold that a
    reader of the map would never hear of."""
    block = _section("Layers, top to bottom").split("```", 2)[1]
    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    layers: set[str] = set()
    for contract in contracts["tool"]["importlinter"]["contracts"]:
        for container in contract.get("containers", [""]):
            for layer in contract.get("layers", []):
                for name in layer.split("|"):
                    dotted = f"{container}.{name.strip()}" if container else name.strip()
                    layers.add(dotted.removeprefix("flowdrop_tui."))
    # a layer is named as a folder (`run/`) or a module (`mode.py`)
    words = set(re.findall(r"[\w.]+/?", block))
    missing = sorted(
        layer
        for layer in layers
        for last in [layer.rsplit(".", 1)[-1]]
        if f"{last}/" not in words and f"{last}.py" not in words
    )
    assert not missing, "the layer block leaves out:\n" + "\n".join(missing)
