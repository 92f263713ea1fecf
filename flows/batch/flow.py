"""A batch over a list of items: pause it mid-list and resume at the next item."""

import time

from flowdrop_tui import flow

ITEMS = [f"chapter-{n:02d}" for n in range(1, 13)]


@flow(resumable=True, description="Review twelve chapters, one per round; skips what is done")
def main(run):
    done = run.state.setdefault("done", [])
    for item in run.rounds(ITEMS):
        if item in done:
            continue  # picked up: this one was finished by an earlier run
        time.sleep(0.5)
        run.log("reviewed", item=item)
        run.state["done"] = [*done, item]  # a new list, so the key set writes it now
        done = run.state["done"]
    return f"{len(done)} chapters reviewed"
