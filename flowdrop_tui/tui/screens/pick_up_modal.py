"""What a pick-up will carry, shown before the run starts: confirm or cancel."""

from __future__ import annotations

from typing import ClassVar

import orjson
from rich.text import Text
from textual.binding import BindingType

from flowdrop_tui.core.run.forecast import Forecast
from flowdrop_tui.format import budget_words
from flowdrop_tui.tui.screens.confirm_modal import ConfirmModal, answer_bindings


def plan_title(key: str, found: Forecast) -> str:
    """``Resume KEY`` for a paused run that drifted, else ``Pick up KEY``."""
    return f"{'Resume' if found.start == 'resume' else 'Pick up'} {key}"


def describe_plan(found: Forecast) -> Text:
    """What ``plan`` would say (one core function, ``core.run.forecast``), below the title:
    from which run, which round comes next, the state keys, the budget, what drifted."""
    answer = found.to_json()
    resuming = found.start == "resume"
    text = Text()
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


class PickUpModal(ConfirmModal):
    """Answers True to start the run, False to leave things as they are."""

    BINDINGS: ClassVar[list[BindingType]] = answer_bindings("pick-up", "Pick up")

    def __init__(self, key: str, forecast: Forecast) -> None:
        super().__init__(
            plan_title(key, forecast),
            describe_plan(forecast),
            confirm="Pick up (y)",
            focus="confirm",
            id="pick-up",
            body_id="pick-up-plan",
        )
        self.key = key
        self.forecast = forecast
