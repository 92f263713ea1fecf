"""Lanes (SPEC §23): several runs of one flow at once, each its own key ``FLOW@LANE``
in its own git worktree, landed only when a person says so.

Floors, top to bottom: ``landing`` and ``cleanup`` (what a person asks of a lane),
``overview`` (each lane's row: what ``lanes`` and the UI show), ``lane_trees``
(making a lane's worktree and branch), ``known`` (the lanes the records
know), ``place`` (a lane's facts: its branch, its worktree's place), ``git_lock`` (every
git write of a lane under the workspace's one lock). A lane is found by its record —
the ``lane`` field of its first run's ``created`` event — never by its name on disk."""
