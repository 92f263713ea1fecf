"""What a pick-up will carry, shown before the run starts: confirm or cancel."""

from __future__ import annotations

from typing import ClassVar

import orjson
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Static

from flowdrop_tui.core.run.plan import StartPlan


def describe_plan(key: str, plan: StartPlan) -> Text:
    """From which run, which round comes next, the state keys."""
    keys = sorted(plan.state)
    text = Text()
    text.append(f"Pick up {key}\n\n", style="bold")
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


class PickUpModal(ModalScreen[bool]):
    """Answers True to start the run, False to leave things as they are."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("y", "answer(True)", "Pick up", id="confirm-pick-up"),
        Binding("escape,n", "answer(False)", "Cancel", id="cancel-pick-up"),
    ]

    def __init__(self, key: str, plan: StartPlan) -> None:
        super().__init__(id="pick-up")
        self.key = key
        self.plan = plan

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Static(describe_plan(self.key, self.plan), markup=False, id="pick-up-plan")
            with Horizontal(classes="buttons"):
                yield Button("Pick up (y)", variant="primary", id="confirm")
                yield Button("Cancel (n)", id="cancel")

    def on_mount(self) -> None:
        self.query_one("#confirm", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "confirm")

    def action_answer(self, answer: bool) -> None:
        self.dismiss(answer)
