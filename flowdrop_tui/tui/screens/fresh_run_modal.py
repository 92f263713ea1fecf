"""``n`` when the thread holds a state that could be picked up: ask before dropping it."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Static

from flowdrop_tui.core.run.plan import StartPlan


class FreshRunModal(ModalScreen[bool]):
    """Answers True to start fresh (round 1, empty state), False to keep things as they are."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("y", "answer(True)", "Start fresh", id="confirm-fresh"),
        Binding("escape,n", "answer(False)", "Cancel", id="cancel-fresh"),
    ]

    def __init__(self, key: str, plan: StartPlan) -> None:
        super().__init__(id="fresh-run")
        self.key = key
        self.plan = plan

    def compose(self) -> ComposeResult:
        plan = self.plan
        text = Text()
        text.append(f"Start {self.key} fresh?\n\n", style="bold")
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
        with Vertical(classes="dialog"):
            yield Static(text, markup=False)
            with Horizontal(classes="buttons"):
                yield Button("Start fresh (y)", variant="warning", id="confirm")
                yield Button("Cancel (n)", id="cancel")

    def on_mount(self) -> None:
        self.query_one("#cancel", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "confirm")

    def action_answer(self, answer: bool) -> None:
        self.dismiss(answer)
