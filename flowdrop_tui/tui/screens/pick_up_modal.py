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

from flowdrop_tui.core.run.forecast import Forecast
from flowdrop_tui.format import budget_words


def describe_plan(key: str, found: Forecast) -> Text:
    """What ``plan`` would say (one core function, ``core.run.forecast``): from which run,
    which round comes next, the state keys, the budget, what drifted."""
    answer = found.to_json()
    resuming = found.start == "resume"
    text = Text()
    text.append(f"{'Resume' if resuming else 'Pick up'} {key}\n\n", style="bold")
    verb = "resume run " if resuming else "from run     "
    text.append(f"  {verb}{answer['source']} ({answer['source_status']})\n")
    text.append(f"  next round   {answer['next_round']}")
    if resuming and answer["item_index"] is not None:
        text.append(f" (item index {answer['item_index']})")
    text.append("\n")
    keys = answer["state_keys"]
    text.append(f"  state keys   {', '.join(keys) if keys else '(empty: the flow cleared it)'}\n")
    state = found.plan.state if found.plan is not None else {}
    for name, value in sorted(state.items()):
        shown = orjson.dumps(value, default=str).decode()
        text.append(f"    {name} = {shown if len(shown) <= 50 else shown[:49] + '…'}\n")
    text.append(f"  budget       {budget_words(answer['budget'])}\n")
    for warning in answer["warnings"]:
        text.append(f"\n  warning: {warning}\n", style="bold")
    if resuming:
        text.append("\nThe paused run continues in its own record where it paused.")
    else:
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

    def __init__(self, key: str, forecast: Forecast) -> None:
        super().__init__(id="pick-up")
        self.key = key
        self.forecast = forecast

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Static(describe_plan(self.key, self.forecast), markup=False, id="pick-up-plan")
            with Horizontal(classes="buttons"):
                yield Button("Pick up (y)", variant="primary", id="confirm")
                yield Button("Cancel (n)", id="cancel")

    def on_mount(self) -> None:
        self.query_one("#confirm", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "confirm")

    def action_answer(self, answer: bool) -> None:
        self.dismiss(answer)
