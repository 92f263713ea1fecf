"""The keys of the main screen's parts (``stop_actions.py``, ``launch_actions.py``,
``open_files.py``) and the size of a page of runs (``workspace_reads.py``), here so
that the screen is built without importing the parts: they load after the first
frame (bench/README.md, (c))."""

from __future__ import annotations

from textual.binding import Binding, BindingType

RUNS_SHOWN = 500  # runs of a flow read at a time: the newest, then a page per "m"

# Actions named for the main screen's delegating methods.
STOP_KEYS: list[BindingType] = [
    Binding(
        "escape",
        "stop_run",
        "Stop",
        id="stop",
        tooltip="Stop the selected flow's live run after its round; again: stop it now. "
        "Escape first closes the filter, a dialog or help; it never closes a paused run",
    ),
    Binding(
        "p",
        "pause_run",
        "Pause",
        id="pause",
        tooltip="Pause the selected flow's run after its round",
    ),
    Binding(
        "x",
        "close_run",
        "Close",
        id="close",
        tooltip="Close the selected flow's paused run for good (asks first, naming it)",
    ),
]

LAUNCH_KEYS: list[BindingType] = [
    Binding("r", "resume_run", "Resume", id="resume", tooltip="Resume the selected paused run"),
    Binding(
        "n",
        "fresh_run",
        "Fresh",
        id="fresh",
        tooltip="Start the selected flow fresh: round 1, empty state",
    ),
    Binding(
        "b",
        "raise_budget",
        "Raise budget",
        id="raise-budget",
        tooltip="Raise the budget the selected run (or its flow's next pick-up) is out of, "
        "then resume or pick up under the new limit",
        show=False,  # the footer has no room at 80 columns: help and the palette list it
    ),
]

# In the footer's order: escape, p, r, x, n (b is in help and the palette).
RUN_KEYS: list[BindingType] = [*STOP_KEYS[:2], LAUNCH_KEYS[0], STOP_KEYS[2], *LAUNCH_KEYS[1:]]

FILE_KEYS: list[BindingType] = [
    Binding("e", "edit_flow", "Edit flow.py", show=False),
    Binding("o", "open_state", "Open state.json", show=False),
    Binding("t", "open_transcript", "Open transcript", show=False),
    Binding(
        "y",
        "copy_run_id",
        "Copy run id",
        id="copy-run-id",
        tooltip="Copy the selected run's id to the clipboard (OSC 52: the terminal's own)",
        show=False,  # the footer has no room at 80 columns: help and the palette list it
    ),
]

# Lanes (SPEC §23). L and a second d are in the footer only while a lane is selected
# (``LazyParts.check_action``); L on another row falls through to the hidden binding,
# which says what L does and how to start lanes. At 80 columns the footer has no room
# for both: on a lane, L takes n's place there (n still works: its hidden binding) and
# d stays in help, as on a flow.
LANE_KEYS: list[BindingType] = [
    Binding(
        "L",
        "land_lane",
        "Land",
        id="land-lane",
        tooltip="Land the selected lane's branch into its base branch (a merge commit), "
        "after asking; refused, changing nothing, on a dirty tree, a live run or a conflict",
    ),
    Binding("L", "land_lane_hint", "Land", show=False),  # on a flow's row: what L does
    Binding("n", "fresh_run_unlisted", "Fresh", show=False),  # n, out of a narrow footer
    Binding(
        "d",
        "show_lane_diff",
        "Diff",
        id="lane-diff",
        tooltip="The selected lane's run's rounds' diffs; [ ] step through its rounds",
    ),
]
