"""The UI's lane words (SPEC §23) for a lane whose worktree git cannot read."""

from __future__ import annotations

from flowdrop_tui.tui.labels import lane_words


def test_a_broken_worktree_is_said() -> None:
    """Guards a broken lane's row: 'broken', not a silent blank where clean/dirty go."""
    facts = {"exists": True, "dirty": None, "note": "broken (git worktree repair)", "ahead": 1}
    assert lane_words(facts) == "broken · +1/-0"
    assert lane_words({"exists": True, "dirty": False, "ahead": 1}) == "clean · +1/-0"
