"""``?``: every key, from the bindings themselves, and what pick up and resume mean."""

from __future__ import annotations

from typing import ClassVar

from rich.console import Group
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import Footer, Static

# (word, what it means): shown as a grid, so a meaning that wraps stays in its column.
WORDS = (
    (
        "Pick up",
        "start a new run that carries a stopped run's state forward; its rounds go on "
        "counting (a loop stopped in round 40 says round 41). Shown before it starts.",
    ),
    ("Resume", "continue a paused run in its own record, from where it paused."),
    (
        "Escape",
        "backs out one step at a time, and a press that closes something does only that: "
        "the filter, a dialog or this help first, then a kept filter. With nothing left to "
        "close it stops the selected flow's live run after the round in flight (state "
        "saved); again: the round in flight is interrupted at once. Escape never closes a "
        "paused run: r resumes it, x closes it for good after a question naming the run "
        "and what is lost (where it paused).",
    ),
    ("Fresh", "n starts over: round 1, empty state. The old runs can still be picked up."),
    (
        "Moving",
        "tab / shift+tab: the next / previous pane (flows, runs, events, run). In a list: "
        "up/down or j/k; g or home: the first row; G or end: the last. In the events: G or "
        "end goes to the bottom and follows new events again. m: the next 500 older runs "
        "of the flow (the runs pane says how many). ctrl+p: every command by name.",
    ),
    (
        "Files",
        "e: the flow's flow.py in $EDITOR; o: the run's state.json in $PAGER; t: the "
        "run's newest transcript in $PAGER. This screen comes back after.",
    ),
    ("Runs", "are started in the background: quitting this screen stops none of them."),
    (
        "Lanes",
        "a flow's rows @1, @2… under it: runs of the flow side by side, each in its own git "
        "worktree and branch (start them: flowdrop-tui run FLOW --lanes 3). Each is a key: "
        "enter, escape, p, d act on it as on a flow. L lands the selected lane's branch into "
        "the branch it was made from (a merge commit), after asking; a dirty tree, a live "
        "run or a conflict is refused, changing nothing.",
    ),
)


class HelpScreen(Screen[None]):
    """The keys, listed from the bindings that are in force, so it cannot drift."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,question_mark,q", "app.pop_screen", "Close help", id="close-help"),
    ]

    def __init__(self, keys: list[tuple[str, str, str]]) -> None:
        super().__init__(id="help")
        self.keys = keys

    def compose(self) -> ComposeResult:
        # A grid, so a description that wraps (at 80 columns) stays in its column.
        keys = Table.grid(padding=(0, 2))
        keys.add_column(style="bold", no_wrap=True)
        keys.add_column()
        for key, description, tooltip in self.keys:
            keys.add_row(key, f"{description} — {tooltip}" if tooltip else description)
        words = Table.grid(padding=(0, 2))
        words.add_column(style="bold", no_wrap=True)
        words.add_column()
        for word, meaning in WORDS:
            words.add_row(word, meaning)
        body = Group(
            Text("Keys\n", style="bold"),
            keys,
            Text("\nWhat the words mean\n", style="bold"),
            words,
        )
        with VerticalScroll(id="help-body"):
            yield Static(body, markup=False)
        yield Footer()
