"""Three tries at one task, side by side, and a person lands the one to keep (SPEC §23).

Run it: ``flowdrop-tui run agent-lanes`` starts lanes ``agent-lanes@1``, ``@2`` and ``@3``
detached, each in its own git worktree on its own branch (``flowdrop/agent-lanes/N``,
made from the commit checked out now), each with its own state, rounds and budget.
In each, Claude Code works on the task a few rounds; then the lane commits its work
in its worktree and asks, through a gate, whether to land it.

``flowdrop-tui lanes`` shows the three; ``flowdrop-tui inbox`` lists their questions.
Answer the one to keep ``land`` (it ends, its work committed), then land it yourself —
the question names the command: ``flowdrop-tui land agent-lanes@2`` (``--squash`` or
``--rebase`` to land it otherwise). Answer the others ``drop`` and remove them:
``flowdrop-tui lanes drop agent-lanes@1 --archive`` keeps their commits in a bundle.
Nothing lands by itself: a lane's run never touches the branch you work on.
"""

from flowdrop_tui import flow

TASK = (
    "Look at this repository and make one small, safe improvement (a typo, a missing "
    "docstring, a clearer name). Say in one paragraph what you changed and why."
)
GO_ON = "Go on with the task if there is more to do; say what you changed and why."
WORK_ROUNDS = 3  # the agent's rounds in a lane before it commits and asks


@flow(
    lanes=3,  # a plain `run agent-lanes` starts lanes 1..3, each in its own worktree
    resumable=True,
    description="Three lanes of Claude Code on one task; each asks before you land it",
    budget={"rounds": 12, "minutes": 240, "tokens": 3_000_000},  # per lane: never runs away
    limit_wait="12h",  # at the account's usage limit: wait it out, then pause
    stall=5,  # SPEC §20: pause after 5 rounds in a row that changed nothing
)
def main(run):
    for _ in run.rounds():
        worked = run.state.get("worked", 0)
        if worked < WORK_ROUNDS:
            result = run.session("claude", run.state.get("task", TASK) if worked == 0 else GO_ON)
            run.state["worked"] = worked + 1
            run.state["said"] = result.text[:600]
            continue
        if not run.state.get("committed"):
            # Committed in a round of its own, so the round that asks (and runs again,
            # as the same round, once answered) asks and nothing else.
            changed = run.session("command", ["git", "status", "--porcelain"])
            if changed.text.strip():
                run.session("command", ["git", "add", "-A"])
                message = f"{run.key}: " + (run.state.get("said") or "the agent's work")[:60]
                run.session("command", ["git", "commit", "-q", "-m", message])
            run.state["committed"] = True
            continue
        decision = run.ask(
            f"Lane {run.key} has committed its work on its branch:\n\n"
            f"{run.state.get('said', '')}\n\n"
            f"Keep it? Answer land, then run: flowdrop-tui land {run.key}\n"
            f"(again: another round of work; drop: end this lane, then "
            f"flowdrop-tui lanes drop {run.key} --archive)",
            choices=["land", "again", "drop"],
        )
        if decision == "again":
            run.state["worked"] = WORK_ROUNDS - 1
            run.state["committed"] = False
            continue
        if decision == "land":
            return f"ready to land: flowdrop-tui land {run.key}"
        return f"dropped: flowdrop-tui lanes drop {run.key} --archive"
