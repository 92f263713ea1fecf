"""``n`` when the thread holds a state that could be picked up: ask before dropping it."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.binding import BindingType

from flowdrop_tui.core.run.start_plan import StartPlan
from flowdrop_tui.tui.screens.confirm_modal import ConfirmModal, answer_bindings


def describe_fresh(plan: StartPlan) -> Text:
    """What a fresh run leaves behind (a paused run, or a state to pick up), and that
    nothing is deleted."""
    text = Text()
    if plan.resume:
        text.append(f"Run {plan.resume} is paused and could be resumed.\n")
    else:
        keys = ", ".join(sorted(plan.state)) or "(empty)"
        text.append(
            f"Run {plan.source} left a state that a plain run would pick up\n"
            f"(next round {plan.first_round}; keys: {keys}).\n"
        )
    text.append(
        "\nA fresh run starts at round 1 with an empty state. Nothing is deleted:\n"
        "enter on that run still picks it up later."
    )
    return text


class FreshRunModal(ConfirmModal):
    """Answers True to start fresh (round 1, empty state), False to keep things as they are."""

    BINDINGS: ClassVar[list[BindingType]] = answer_bindings("fresh", "Start fresh")

    def __init__(self, key: str, plan: StartPlan) -> None:
        super().__init__(
            f"Start {key} fresh?",
            describe_fresh(plan),
            confirm="Start fresh (y)",
            variant="warning",
            focus="cancel",
            id="fresh-run",
        )
        self.key = key
        self.plan = plan
