"""The floor plan's other half: no import circle (sizes and names: test_architecture.py)."""

from __future__ import annotations

import grimp


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
