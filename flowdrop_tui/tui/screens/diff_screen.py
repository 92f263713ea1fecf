"""``d``: what one round of the selected run changed (SPEC §20) — its files and patch,
as ``flowdrop-tui diff RUN --round N`` says it; ``[``/``]`` (or left/right) step
through the run's rounds, ``s`` shows instead what the run's state changed against
the run it was picked up from (``diff RUN --state``) and back, escape closes. Read in
a thread: git may take a moment."""

from __future__ import annotations

from typing import Any, ClassVar

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import Footer, Static

from flowdrop_tui.core.errors import FlowdropError
from flowdrop_tui.core.mode import Mode
from flowdrop_tui.core.state_diff import state_diff
from flowdrop_tui.diff_words import diff_head, diff_notes, diff_nothing, state_diff_lines

PATCH_SHOWN = 400_000  # characters of a patch put on the screen (``diff RUN`` has all)

_STYLES = (("+++", "bold"), ("---", "bold"), ("@@", "cyan"), ("+", "green"), ("-", "red"))
_STATE_STYLES = {"+": "green", "-": "red", "~": "yellow"}


def patch_text(patch: str) -> Text:
    """A patch with its added, removed and hunk lines coloured."""
    text = Text()
    cut = len(patch) > PATCH_SHOWN
    for line in (patch[:PATCH_SHOWN] if cut else patch).splitlines():
        style = "bold" if line.startswith("diff --git") else ""
        for prefix, chosen in _STYLES:
            if not style and line.startswith(prefix):
                style = chosen
        text.append(line + "\n", style=style)
    if cut:
        text.append("… cut short here: flowdrop-tui diff shows all of it\n", style="dim")
    return text


class DiffScreen(Screen[None]):
    """One round's changes; the round stepped with keys."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q,d", "app.pop_screen", "Close", id="close-diff"),
        Binding(
            "left_square_bracket,left",
            "step(-1)",
            "Earlier round",
            id="diff-earlier",
            key_display="[",
        ),
        Binding(
            "right_square_bracket,right",
            "step(1)",
            "Later round",
            id="diff-later",
            key_display="]",
        ),
        Binding(
            "s",
            "toggle_state",
            "State changes",
            id="diff-state",
            tooltip="What the run's state changed against the run it was picked up from, "
            "or back to the round's files",
        ),
    ]

    def __init__(self, mode: Mode, run_id: str, number: int | None = None) -> None:
        super().__init__(id="diff")
        self.mode = mode
        self.run_id = run_id
        self.number = number  # None: the run's last round
        self.rounds: tuple[int, int] | None = None
        self.found: dict[str, Any] | None = None
        self.showing_state = False

    def compose(self) -> ComposeResult:
        yield Static(f"run {self.run_id}: reading…", id="diff-head", markup=False)
        with VerticalScroll(id="diff-body"):
            yield Static("", id="diff-patch", markup=False)
        yield Footer()

    def on_mount(self) -> None:
        self.load(self.number)

    @work(thread=True, exclusive=True, group="diff")
    def load(self, number: int | None) -> None:
        try:
            self.mode.sync(run_refs=True, run=self.run_id)  # remote mode: the run's pushed commits
            found = self.mode.round_diff(self.run_id, number)
        except FlowdropError as exc:
            self.app.call_from_thread(self.show_error, exc.message)
            return
        self.app.call_from_thread(self.show, found)

    def show(self, found: dict[str, Any]) -> None:
        self.found = found
        self.number = int(found["round"])
        first, last = found["rounds"]
        self.rounds = (int(first), int(last))
        head = Text(f"run {self.run_id} {diff_head(found)}\n", style="bold")
        for row in found.get("files") or []:
            head.append(f"  {row.get('status'):<12} {row.get('path')}\n")
        for note in diff_notes(found):
            head.append(f"  ({note})\n", style="dim")
        head.append("[ ] earlier / later round · s state changes · escape closes", style="dim")
        self.query_one("#diff-head", Static).update(head)
        patch = str(found.get("patch") or "")
        body = patch_text(patch) if patch else Text(diff_nothing(found), style="dim")
        self.query_one("#diff-patch", Static).update(body)
        self.query_one("#diff-body", VerticalScroll).scroll_home(animate=False)

    def action_toggle_state(self) -> None:
        self.showing_state = not self.showing_state
        if self.showing_state:
            self.query_one("#diff-head", Static).update(f"run {self.run_id}: reading its state…")
            self.load_state()
        else:
            self.query_one("#diff-head", Static).update(f"run {self.run_id}: reading…")
            self.load(self.number)

    @work(thread=True, exclusive=True, group="diff")
    def load_state(self) -> None:
        try:
            self.mode.sync()
            found = state_diff(self.mode.layout, self.run_id)
        except FlowdropError as exc:
            said = exc.message.removeprefix(f"run {self.run_id} ")  # named once, by the head
            self.app.call_from_thread(self.show_error, f"{said}\ns: back to its rounds")
            return
        self.app.call_from_thread(self.show_state, found)

    def show_state(self, found: dict[str, Any]) -> None:
        about, *lines = state_diff_lines(found)
        head = Text(f"run {self.run_id} {about}\n", style="bold")
        head.append("s the round's files · escape closes", style="dim")
        self.query_one("#diff-head", Static).update(head)
        body = Text()
        for line in lines:
            body.append(line + "\n", style=_STATE_STYLES.get(line[2:3], ""))
        if not lines:
            body.append("the state is as it was in the run it was picked up from", style="dim")
        self.query_one("#diff-patch", Static).update(body)
        self.query_one("#diff-body", VerticalScroll).scroll_home(animate=False)

    def show_error(self, message: str) -> None:
        self.query_one("#diff-head", Static).update(Text(f"run {self.run_id}: {message}"))
        self.query_one("#diff-patch", Static).update("")

    def action_step(self, by: int) -> None:
        if self.showing_state:
            self.action_toggle_state()  # back to the rounds, where [ and ] step
            return
        if self.rounds is None or self.number is None:
            return
        first, last = self.rounds
        number = min(last, max(first, self.number + by))
        if number == self.number:
            self.notify(f"round {number} is the run's {'first' if by < 0 else 'last'}")
            return
        self.number = number
        self.query_one("#diff-head", Static).update(f"run {self.run_id}: round {number}…")
        self.load(number)
