"""A non-resumable flow: every run starts fresh, whatever the last one left."""

import time

from flowdrop_tui import flow


@flow(description="Check the working tree three times (never picked up)")
def main(run):
    for check in run.rounds(range(3)):
        result = run.session("command", ["git", "status", "--short"])
        run.state["clean"] = result.text.strip() == ""
        run.state["checks"] = check + 1
        time.sleep(0.2)
    return "clean" if run.state["clean"] else "dirty"
