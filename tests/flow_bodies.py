"""Flow bodies that several test files run, named for what each does.

Each is the text of a ``flows/<name>/flow.py``, for ``write_flow`` or ``flow_writer``.
A body that only one test needs stays in that test, next to what it checks.
"""

from __future__ import annotations


def counts_rounds(
    key: str = "n",
    *,
    sleep: float | None = None,
    description: str | None = None,
    resumable: bool = True,
) -> str:
    """A flow that counts rounds for ever: ``run.state[key]`` is the round number,
    saved at the start of each round, then it sleeps ``sleep`` seconds (if given)."""
    options = ["resumable=True"] if resumable else []
    if description is not None:
        options.append(f"description={description!r}")
    lines = ["import time"] if sleep is not None else []
    lines += [
        "from flowdrop_tui import flow",
        "",
        f"@flow({', '.join(options)})",
        "def main(run):",
        "    for round in run.rounds():",
        f"        run.state[{key!r}] = round",
    ]
    if sleep is not None:
        lines.append(f"        time.sleep({sleep})")
    return "\n".join(lines) + "\n"


def adds_one_a_round(key: str, rounds: int) -> str:
    """A resumable flow of ``rounds`` rounds, each adding one to ``run.state[key]``; it
    returns the count (a run picked up from one that ended adds ``rounds`` more)."""
    return (
        "\n".join(
            [
                "from flowdrop_tui import flow",
                "",
                "@flow(resumable=True)",
                "def main(run):",
                f"    for r in run.rounds(range({rounds})):",
                f"        run.state[{key!r}] = run.state.get({key!r}, 0) + 1",
                f"    return run.state[{key!r}]",
            ]
        )
        + "\n"
    )


ONE_LONG_ROUND = """
    import time
    from flowdrop_tui import flow

    @flow(resumable=True, description="one long round")
    def main(run):
        for round in run.rounds():
            run.state["n"] = round
            time.sleep(120)
"""
"""Resumable; saves the round as ``n``, then sleeps two minutes in that round: a run
that stays live (and mid-round) for as long as a test needs it."""

ITEMS_HELD_BY_GATE = """
    import pathlib, time
    from flowdrop_tui import flow

    @flow(resumable=True, description="items, each held while the gate file exists")
    def main(run):
        gate = pathlib.Path(run.workspace) / "hold"
        for item in run.rounds(list("abcdef")):
            while gate.exists():
                time.sleep(0.05)
            run.state["last"] = item
"""
"""Resumable; six items ``a``..``f``, each waiting while the workspace's ``hold`` file
exists, then saved as ``last``: a test holds it mid-run with that file."""

LOGS_A_TICK_EVERY_TENTH = """
    import time
    from flowdrop_tui import flow

    @flow(description="an event every 0.1 s", stall=None)
    def main(run):
        for round in run.rounds():
            run.log(f"tick {round}")
            time.sleep(0.1)
"""
"""Not resumable; logs a ``tick N`` event every 0.1 s until stopped (it changes nothing:
``stall=None``, or it would pause as stalled after 5 rounds, SPEC §20)."""

RETURNS_AT_ONCE = """
    from flowdrop_tui import flow

    @flow(description="returns at once")
    def main(run):
        return "done"
"""
"""Not resumable; ends at once with the result ``"done"``."""

ADDS_ONE_A_RUN = """
    from flowdrop_tui import flow

    @flow(resumable=True)
    def main(run):
        run.state["n"] = run.state.get("n", 0) + 1
"""
"""Resumable, no rounds; each run adds one to the ``n`` it picked up (so a run picked
up from a run with ``n == 1`` ends with ``n == 2``)."""

DOES_NOTHING = """
    from flowdrop_tui import flow

    @flow()
    def main(run):
        pass
"""
"""Not resumable; ends at once with no state and no result."""


THREE_ROUNDS_A_RUN = """
    from flowdrop_tui import flow

    @flow(resumable=True, description="three rounds a run", budget={"rounds": 10})
    def main(run):
        for round in run.rounds():
            run.state["n"] = round
            if round % 3 == 0:
                return round
"""
"""Resumable with a budget of 10 rounds; saves the round as ``n`` and completes every
third round: each run is three rounds, so a key has runs to pick up from."""

ABC_HELD_BY_GATE = """
import time
from flowdrop_tui import flow

@flow(resumable=True)
def main(run):
    for item in run.rounds(["a", "b", "c"]):
        run.state["last"] = item
        while (run.workspace / "hold").exists():
            time.sleep(0.02)
"""
"""Resumable; items ``a``, ``b``, ``c`` saved as ``last``, each round held while the
workspace's ``hold`` file exists."""
