"""``L`` on a lane: landing it is asked, naming the lane, where it goes and how; the
question stays on screen, saying so, until the landing is done (keys typed meanwhile —
a hurried second enter, escapes — reach it, not the flow list behind it)."""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

from rich.text import Text
from textual.binding import BindingType
from textual.widgets import Button, Static

from flowdrop_tui.tui.screens.confirm_modal import ConfirmModal, answer_bindings

METHOD = "merge"  # SPEC §23: land's default; --squash and --rebase stay the CLI's


def describe_land(key: str, branch: str, into: str | None) -> Text:
    """What landing does, below the title: the lane's branch merged into ``into``."""
    target = into or "its base branch"
    text = Text()
    text.append(f"  lane     {key}\n")
    text.append(f"  branch   {branch}\n")
    text.append(f"  into     {target}\n")
    text.append(f"  method   {METHOD} (a merge commit, --no-ff)\n\n")
    text.append(  # one paragraph: it wraps to the dialog's width (74 cells at 80×24)
        f"What {branch} has committed is merged into {target} as one merge commit, "
        "revertable as one. Refused, changing nothing, when the lane's tree or the "
        "target's checkout has uncommitted changes, the lane has a live run, or the "
        "merge conflicts."
    )
    return text


class LandLaneModal(ConfirmModal):
    """Yes starts ``land`` and keeps the question up, saying it is landing, until
    ``done``; no (``n``, escape) closes it, answering False. Once landing, every
    answer is ignored: it is landed once."""

    BINDINGS: ClassVar[list[BindingType]] = answer_bindings("land", "Land it", "Leave it")

    def __init__(
        self, key: str, branch: str, into: str | None, land: Callable[[LandLaneModal], object]
    ) -> None:
        super().__init__(
            f"Land lane {key} into {into or 'its base branch'}?",
            describe_land(key, branch, into),
            confirm="Land (y)",
            cancel="Leave it (n)",
            focus="confirm",  # as enter's pick-up: enter lands; an enter typed before
            # it was on screen is not its answer (keys.AsksFirst)
            id="land-lane",
            body_id="land-lane-what",
        )
        self.key = key
        self.into = into
        self.land = land
        self.landing = False

    def action_answer(self, answer: bool) -> None:
        if self.landing:
            return
        if not answer:
            self.dismiss(False)
            return
        self.landing = True
        for button in self.query(Button):
            button.disabled = True
        self.query_one("#land-lane-what", Static).update(Text(f"Landing {self.key}…", style="bold"))
        self.land(self)

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.action_answer(event.button.id == "confirm")

    def done(self) -> None:
        """The landing answered (landed or refused: said in a notification)."""
        if self.is_current:
            self.dismiss(True)
