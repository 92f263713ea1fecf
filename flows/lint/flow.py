"""Called by `caller`: a flow with its own key and its own state."""

from flowdrop_tui import flow


@flow(resumable=True, description="Count lint passes (called by caller)")
def main(run, target="."):
    run.state["passes"] = run.state.get("passes", 0) + 1
    run.state["target"] = target
    return run.state["passes"]
