"""A resumable counting loop: stop it, kill it, run it again — it goes on counting."""

import time

from flowdrop_tui import flow


@flow(resumable=True, description="Count forever, a round a second; picks up where it stopped")
def main(run):
    run.state.setdefault("since", run.run_id)  # written now: where this thread began
    for round in run.rounds():
        run.state["count"] = run.state.get("count", 0) + 1  # written now
        run.state["last_round"] = round
        print(f"round {round}: count is {run.state['count']}")
        time.sleep(1)
