"""Raise a budget where its refusal is (SPEC §14): enter or ``r`` on a run refused for
its budget (``BUDGET_EXHAUSTED``), or ``b``, asks for the new limit — the one reached,
prefilled — and the resume or pick-up then goes ahead under it, as ``--max-KIND N``
does on the command line (``LaunchActions`` passes exactly those flags on).

``none`` lifts the budget: said once, as a question of its own (``LiftBudgetModal``),
and done only on its ``y`` — as ``--max-KIND none`` asks on the command line."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

from rich.text import Text
from textual import on
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.widgets import Button, Input, Static

from flowdrop_tui.core.records.spend.budget import Limits, Reached, check_limit
from flowdrop_tui.format import lift_words
from flowdrop_tui.tui.keys import shown_after_paint
from flowdrop_tui.tui.screens.confirm_modal import Asking, ConfirmModal, answer_bindings, ask
from flowdrop_tui.tui.widgets.typed_input import TypedInput


def shown_number(value: float | int) -> str:
    """``5``, ``2.5``: a limit as it is typed (no ``5.0``)."""
    return f"{value:g}" if isinstance(value, float) else str(value)


def new_limit(kind: str, text: str, used: float | int) -> float | int | None:
    """The limit typed for ``kind`` — ``none`` lifts it — checked as ``--max-KIND`` is,
    and above what is used (else the run would be refused again). ``ValueError`` says
    what is wrong in a few words."""
    typed = text.strip().lower()
    if typed in ("none", "off"):
        return None
    try:
        value: float = float(typed) if kind == "minutes" else int(typed)
    except ValueError:
        whole = "a number" if kind == "minutes" else "a whole number"
        raise ValueError(f"the {kind} budget takes {whole} (or none), not {text!r}") from None
    limit = check_limit(kind, value, f"--max-{kind}")
    assert limit is not None
    if limit <= used:
        raise ValueError(
            f"{shown_number(limit)} is not more than the {shown_number(used)} used: "
            "the run would be refused again"
        )
    return limit


def limit_args(limits: Limits) -> list[str]:
    """``--max-rounds 5`` for each limit (``none`` lifts it): what the CLI is given."""
    passed: list[str] = []
    for kind, value in limits.items():
        passed += [f"--max-{kind}", "none" if value is None else shown_number(value)]
    return passed


class RaiseBudgetModal(Asking[Limits]):
    """Asks for a new limit of the budget ``reached``; answers ``{kind: limit}`` (enter or
    the button) or None (escape). ``resuming``: the paused run ``whose`` goes on in its
    own record; else a new run of the thread picks up."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "cancel", "Cancel", id="cancel-raise"),
    ]

    def __init__(self, whose: str, reached: Reached, cli: str, *, resuming: bool) -> None:
        super().__init__(id="raise-budget")
        self.reached = reached
        self.title_text = f"Raise the {reached.budget} budget of {whose}"
        self.cli = cli  # the command that does the same
        self.go = "Raise and resume" if resuming else "Raise, then preview the pick-up"

    def compose(self) -> ComposeResult:
        kind = self.reached.budget
        unit = " minutes" if kind == "minutes" else ""
        question = Text()
        question.append(f"{self.title_text}\n\n", style="bold")
        used, limit = self.reached.used, self.reached.limit
        out = "; out of budget" if used >= limit else ""
        question.append(f"{shown_number(used)}{unit} used of {shown_number(limit)}{out}\n")
        question.append(f"the same as: {self.cli}\n\n")
        question.append(f"new {kind} limit (more than {shown_number(self.reached.used)};")
        question.append(" none lifts it):")
        with Vertical(classes="dialog"):
            yield Static(question, markup=False, id="raise-question")
            # Selected as it opens: the new number typed replaces it.
            yield TypedInput(shown_number(self.reached.limit), id="new-limit")
            yield Static("", id="raise-problem", markup=False)
            with Horizontal(classes="buttons"):
                yield Button(f"{self.go} (enter)", variant="primary", id="confirm")
                yield Button("Cancel (escape)", id="cancel")

    def on_mount(self) -> None:
        self.query_one(Input).focus()
        shown_after_paint(self)

    @on(Input.Submitted)
    @on(Button.Pressed, "#confirm")
    def raise_it(self) -> None:
        kind = self.reached.budget
        try:
            limit = new_limit(kind, self.query_one(Input).value, self.reached.used)
        except ValueError as exc:
            self.query_one("#raise-problem", Static).update(str(exc))
            return
        self.dismiss({kind: limit})

    @on(Button.Pressed, "#cancel")
    def action_cancel(self) -> None:
        self.dismiss(None)


class LiftBudgetModal(ConfirmModal):
    """``none`` was typed: what no limit means, and ``y`` to lift it anyway (the cancel
    button has focus: an enter typed on after the dialog's own keeps the limit)."""

    BINDINGS: ClassVar[list[BindingType]] = answer_bindings("lift", "Lift it", "Keep a limit")

    def __init__(self, kinds: list[str]) -> None:
        super().__init__(
            f"Lift the {' and '.join(kinds)} budget?",
            Text(f"{lift_words(kinds)}.\n"),
            confirm="Lift it (y)",
            variant="warning",
            cancel="Keep a limit (n)",
            id="lift-budget",
            body_id="lift-words",
        )


def lift_confirmed(app: App[Any], go: Callable[[Limits], None]) -> Callable[[Limits | None], None]:
    """What a ``RaiseBudgetModal`` answers, handed to ``go`` — a lifted limit only after
    ``LiftBudgetModal``'s ``y`` (asked in the next frame, once the raise has closed)."""

    def answered(limits: Limits | None) -> None:
        if limits is None:
            return
        lifted = [kind for kind, limit in limits.items() if limit is None]
        if not lifted:
            go(limits)
            return

        def confirmed(yes: bool | None) -> None:
            if yes:
                go(limits)

        app.call_later(ask, app, LiftBudgetModal(lifted), confirmed)

    return answered
