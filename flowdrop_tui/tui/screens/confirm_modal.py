"""A yes-or-no question in a dialog: the one modal every confirmation is made of.

``y`` (or the confirm button) answers True; ``n``, escape (or the cancel button)
answer False, so escape never confirms. A question whose answer could only be
"no" has no confirm button, and then ``y`` answers False too. Each question is a
subclass that builds its words and names its bindings (``answer_bindings``), so
the footer says what ``y`` does there and a keymap can address each binding.

A key typed before the question's first frame was painted is not its answer
(``keys.AsksFirst``): a preview read late is never confirmed by an enter typed
before it appeared.

Every question is shown through ``ask``: one question at a time. A key pressed
twice fast (enter enter, n n, x x, or the palette while a question is open) asks
nothing more while a question is on screen — never the same dialog twice
(Textual refuses a second screen with the same id: ``DuplicateIds``, exit 1).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar, Literal, TypeVar

from rich.text import Text
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Static
from textual.widgets.button import ButtonVariant

from flowdrop_tui.tui.keys import AsksFirst, shown_after_paint

T = TypeVar("T")


class Asking(AsksFirst, ModalScreen[T]):
    """What ``ask`` shows: a modal that asks first, named by its ``title_text``."""

    title_text: str


def answer_bindings(name: str, confirm: str, cancel: str = "Cancel") -> list[BindingType]:
    """``y`` confirms, ``n`` and escape cancel; ``confirm`` and ``cancel`` are the footer's
    words, the ids ``confirm-<name>`` and ``cancel-<name>``."""
    return [
        Binding("y", "answer(True)", confirm, id=f"confirm-{name}"),
        Binding("escape,n", "answer(False)", cancel, id=f"cancel-{name}"),
    ]


class ConfirmModal(Asking[bool]):
    """Asks ``title`` (bold) above ``body``; answers True to go ahead, False to leave things
    as they are. ``confirm`` None: nothing to go ahead with, only the cancel button.
    ``focus``: the button that has focus when it opens (the safe answer unless said)."""

    BINDINGS: ClassVar[list[BindingType]] = answer_bindings("answer", "Confirm")
    EARLY_ANSWERS: ClassVar[frozenset[str]] = frozenset({"escape", "n"})  # both say no

    def __init__(
        self,
        title: str,
        body: Text,
        *,
        confirm: str | None = "Confirm (y)",
        variant: ButtonVariant = "primary",
        cancel: str = "Cancel (n)",
        focus: Literal["confirm", "cancel"] = "cancel",
        id: str | None = None,
        body_id: str | None = None,
    ) -> None:
        super().__init__(id=id)
        self.title_text = title
        self.question = Text()
        self.question.append(f"{title}\n\n", style="bold")
        self.question.append_text(body)
        self.confirm_label = confirm
        self.variant: ButtonVariant = variant
        self.cancel_label = cancel
        self.focus_on = focus if confirm is not None else "cancel"
        self.body_id = body_id

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield from self.compose_question()
            with Horizontal(classes="buttons"):
                if self.confirm_label is not None:
                    yield Button(self.confirm_label, variant=self.variant, id="confirm")
                yield Button(self.cancel_label, id="cancel")

    def compose_question(self) -> ComposeResult:
        """The words above the buttons; a subclass may put them in a container."""
        yield Static(self.question, markup=False, id=self.body_id)

    def on_mount(self) -> None:
        self.query_one(f"#{self.focus_on}", Button).focus()
        shown_after_paint(self)

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "confirm")

    def action_answer(self, answer: bool) -> None:
        self.dismiss(answer and self.confirm_label is not None)


def open_question(app: App[Any]) -> AsksFirst | None:
    """The question on screen (anywhere on the screen stack), if one is: a yes or no,
    an answer to type, a new limit (every screen that asks first)."""
    for screen in reversed(app.screen_stack):
        if isinstance(screen, AsksFirst):
            return screen
    return None


def ask(app: App[Any], question: Asking[T], answered: Callable[[T | None], None]) -> bool:
    """Show ``question`` and call ``answered`` with the answer — unless a question is
    already on screen: then nothing is asked (a second press of the key that asked it
    does nothing; another question is named in a warning). True when it was shown."""
    showing = open_question(app)
    if showing is None:
        app.push_screen(question, answered)
        return True
    if type(showing) is not type(question):
        app.notify(
            f"a question is open ({showing.title_text}): answer it first (y or n)",
            severity="warning",
            markup=False,
        )
    return False
