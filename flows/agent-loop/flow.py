"""An agent loop left to work unattended: Claude Code proposes a change a round at a
time, within a budget, waiting out its usage limit, and asks a person before it lands.

Run it: ``flowdrop-tui run agent-loop --detach``. When it asks, ``flowdrop-tui inbox``
lists the question with the exact command; ``flowdrop-tui answer RUN land`` resumes it
(or press ``i`` in the UI, then enter on the question).

An answer re-runs the round that asked as that same round (the same number, marked
``"again": true``, not counted again by the rounds budget), and ``run.ask`` returns the
answer there: code before it in that round runs again, so the round that asks does
nothing else. The answer belongs to that round's question only; a later round asks
anew, and an answer the re-run does not ask for is closed, never returned later.
"""

from flowdrop_tui import flow

TASK = (
    "Look at this repository and make one small, safe improvement (a typo, a missing "
    "docstring, a clearer name). Say in one paragraph what you changed and why."
)


@flow(
    resumable=True,
    description="Claude Code improves the repository; asks before it lands each change",
    budget={"rounds": 20, "minutes": 240, "tokens": 2_000_000},  # never runs away
    limit_wait="12h",  # at the account's usage limit: wait it out, then pause
    stall=5,  # SPEC §20: pause after 5 rounds in a row that changed nothing, or failed alike
)
def main(run):
    landed = run.state.setdefault("landed", [])
    for _ in run.rounds():
        proposal = run.state.get("proposal")
        if proposal is None:
            # The agent's work is saved in the state before the question is asked, so the
            # round that asks (and runs again, as the same round, once answered) asks and
            # nothing else.
            result = run.session("claude", run.state.get("task", TASK))
            run.state["proposal"] = {"text": result.text, "ok": result.ok}
            continue
        decision = run.ask(
            f"Land this change?\n\n{proposal['text'][:600]}", choices=["land", "again", "stop"]
        )
        del run.state["proposal"]
        if decision == "land":
            git = run.session("command", ["git", "status", "--porcelain"])
            if git.text.strip():
                run.session("command", ["git", "add", "-A"])
                message = "agent-loop: " + proposal["text"][:60]
                run.session("command", ["git", "commit", "-m", message])
            landed.append(proposal["text"][:200])
            run.state["landed"] = landed
            return f"landed {len(landed)} change(s)"
        if decision == "stop":
            return f"stopped; landed {len(landed)} change(s)"
