"""The one yes-or-no dialog every confirmation is made of (docs/decisions.md,
"One home per fact")."""

from __future__ import annotations

from typing import Any

import pytest
from rich.text import Text
from textual.app import App
from textual.widgets import Button, Static

from flowdrop_tui.tui.screens.confirm_modal import ConfirmModal
from tests.tui.tui_helpers import until


class Asker(App[None]):
    """Opens one ConfirmModal and keeps its answer."""

    def __init__(self, **options: Any) -> None:
        super().__init__()
        self.options = options
        self.answers: list[bool | None] = []

    def on_mount(self) -> None:
        modal = ConfirmModal("Go?", Text("the words"), body_id="words", **self.options)
        self.push_screen(modal, self.answers.append)


@pytest.mark.parametrize(
    ("key", "options", "answer"),
    [
        ("y", {}, True),
        ("n", {}, False),
        ("escape", {}, False),
        ("escape", {"focus": "confirm"}, False),  # escape never confirms
        ("enter", {"focus": "confirm"}, True),  # enter presses the focused button
        ("enter", {}, False),  # the safe answer has focus unless said
        ("y", {"confirm": None}, False),  # nothing to say yes to
    ],
)
async def test_each_key_gives_its_answer(key: str, options: dict[str, Any], answer: bool) -> None:
    app = Asker(**options)
    async with app.run_test() as pilot:
        await pilot.pause()
        assert isinstance(app.screen, ConfirmModal)
        await pilot.press(key)
        await pilot.pause()
        assert app.answers == [answer]
        assert not isinstance(app.screen, ConfirmModal)


async def test_the_title_is_bold_above_the_words_and_the_buttons_are_as_asked() -> None:
    app = Asker(confirm="Do it (y)", cancel="Leave it (n)", variant="error")
    async with app.run_test() as pilot:
        await until(pilot, lambda: app.screen.query("#cancel"), what="the question composed")
        modal = app.screen
        assert isinstance(modal, ConfirmModal)
        question = modal.question
        assert question.plain == "Go?\n\nthe words"
        assert [(s.start, s.end, str(s.style)) for s in question.spans] == [(0, 5, "bold")]
        assert str(modal.query_one("#words", Static).render()) == question.plain
        confirm = app.screen.query_one("#confirm", Button)
        assert (str(confirm.label), confirm.variant) == ("Do it (y)", "error")
        assert str(app.screen.query_one("#cancel", Button).label) == "Leave it (n)"
        assert app.focused is app.screen.query_one("#cancel", Button)


async def test_without_a_confirm_button_only_cancel_is_shown_and_has_focus() -> None:
    app = Asker(confirm=None, focus="confirm")
    async with app.run_test() as pilot:
        await pilot.pause()
        assert not app.screen.query("#confirm")
        assert app.focused is app.screen.query_one("#cancel", Button)
