"""The cleanup rule alone (SPEC §23), no git: what ``decide`` refuses, removes and
keeps for the facts a lane can have — the fast tier's share of the property test."""

from __future__ import annotations

import pytest

from flowdrop_tui.core.errors import AlreadyRunningError, DirtyTreeError, UnmergedWorkError
from flowdrop_tui.core.lanes.cleanup import Facts, decide

STANDING = Facts(exists=True, branch=True, base="main")


@pytest.mark.parametrize(
    ("facts", "options", "refused"),
    [
        (Facts(live=True, exists=True), {"archive": True}, AlreadyRunningError),
        (Facts(exists=True, branch=True, unmerged=2, unsaved=2), {}, UnmergedWorkError),
        (Facts(exists=True, branch=True, changed=("a.txt",)), {}, DirtyTreeError),
        (Facts(branch=True, unmerged=1, unsaved=1), {"delete_branch": True}, UnmergedWorkError),
    ],
)
def test_refusals(facts: Facts, options: dict[str, bool], refused: type) -> None:
    """Guards the refusals: a live run, unsaved commits, a dirty tree, and deleting an
    unsaved branch whose worktree is gone."""
    made = decide("f@1", facts, **options)
    assert isinstance(made.refused, refused)
    assert not (made.remove_tree or made.delete_branch or made.bundle or made.patch)


def test_what_goes_and_what_stays() -> None:
    """Guards the deeds: merged → both go; pushed → the tree goes, the branch stays
    (deleted on asking); archived → bundle and patch first; a gone tree keeps an
    unsaved branch without refusing; a half-made tree's "changes" are nobody's."""
    merged = decide("f@1", STANDING)
    assert merged.remove_tree and merged.delete_branch and merged.refused is None
    pushed = Facts(exists=True, branch=True, unmerged=1, unsaved=0, base="main")
    assert decide("f@1", pushed).remove_tree and not decide("f@1", pushed).delete_branch
    assert decide("f@1", pushed, delete_branch=True).delete_branch
    dirty = Facts(exists=True, branch=True, unmerged=1, unsaved=1, changed=("x",), base="main")
    saved = decide("f@1", dirty, archive=True)
    assert saved.bundle and saved.patch and saved.remove_tree and not saved.delete_branch
    assert decide("f@1", dirty, archive=True, delete_branch=True).delete_branch
    gone = decide("f@1", Facts(branch=True, unmerged=1, unsaved=1, base="main"))
    assert gone.refused is None and not gone.delete_branch and not gone.remove_tree
    half = decide("f@1", Facts(exists=True, half_made=True, changed=("x",), branch=True))
    assert half.remove_tree and not half.patch and half.refused is None
