"""What a pick-up will carry, shown before the run starts: confirm or cancel."""

from __future__ import annotations

from typing import ClassVar

import orjson
from rich.text import Text
from textual.binding import BindingType

from flowdrop_tui.core.run.plan import StartPlan
from flowdrop_tui.tui.screens.confirm_modal import ConfirmModal, answer_bindings


def describe_plan(plan: StartPlan) -> Text:
    """From which run, which round comes next, the state keys (below the title)."""
    keys = sorted(plan.state)
    text = Text()
    text.append(f"  from run     {plan.source} ({plan.source_status})\n")
    text.append(f"  next round   {plan.first_round}\n")
    text.append(f"  state keys   {', '.join(keys) if keys else '(empty: the flow cleared it)'}\n")
    for name, value in sorted(plan.state.items()):
        shown = orjson.dumps(value, default=str).decode()
        text.append(f"    {name} = {shown if len(shown) <= 50 else shown[:49] + '…'}\n")
    for warning in plan.warnings:
        text.append(f"\n  warning: {warning}\n")
    text.append(
        "\nThe new run starts its loops from the beginning with this state;\n"
        "the conversation of earlier sessions does not come back."
    )
    return text


class PickUpModal(ConfirmModal):
    """Answers True to start the run, False to leave things as they are."""

    BINDINGS: ClassVar[list[BindingType]] = answer_bindings("pick-up", "Pick up")

    def __init__(self, key: str, plan: StartPlan) -> None:
        super().__init__(
            f"Pick up {key}",
            describe_plan(plan),
            confirm="Pick up (y)",
            focus="confirm",
            id="pick-up",
            body_id="pick-up-plan",
        )
        self.key = key
        self.plan = plan
