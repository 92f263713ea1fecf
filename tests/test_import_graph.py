"""The floor plan's other half: no import circle, no module too big to hold in the head."""

from __future__ import annotations

from pathlib import Path

import grimp

PACKAGE = Path(__file__).resolve().parents[1] / "flowdrop_tui"
MAX_LINES = 600


def test_no_import_circle() -> None:
    """Guards against two modules importing each other, however indirectly (the last
    circle was the executor seam and the Temporal executor): type-only imports count."""
    graph = grimp.build_graph("flowdrop_tui", exclude_type_checking_imports=False)
    circles = []
    for module in sorted(graph.modules):
        for imported in graph.find_modules_directly_imported_by(module):
            if not imported.startswith("flowdrop_tui.") or imported == module:
                continue
            back = graph.find_shortest_chain(importer=imported, imported=module)
            # A module importing its own package (whose __init__ re-exports it) is the
            # package's face, not a circle of the floor plan.
            if back is not None and module.rsplit(".", 1)[0] != imported:
                circles.append((module, *back))
    assert not circles, "\n".join(" -> ".join(c) for c in circles)


def test_no_module_over_600_lines() -> None:
    """Guards the size a reader holds in the head (the anchors' modules are 65–150
    lines; their one failing is a 1,500-line app.py)."""
    big = {
        str(path.relative_to(PACKAGE)): n
        for path in PACKAGE.rglob("*.py")
        if (n := len(path.read_text().splitlines())) > MAX_LINES
    }
    assert not big, big
