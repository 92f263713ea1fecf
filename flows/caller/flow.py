"""A flow that calls another: two flows, two keys, two states in one state.json."""

import time

from flowdrop_tui import flow


@flow(resumable=True, description="Each round calls `lint`, which keeps its own state")
def main(run):
    for round in run.rounds(range(3)):
        passes = run.call("lint", target=f"pass {round}")
        run.state["lint_passes_seen"] = passes
        time.sleep(0.3)
    return "three rounds of lint"
