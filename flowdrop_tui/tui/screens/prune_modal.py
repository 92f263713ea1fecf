"""Prune from the command palette: the dry run first, in a modal; delete only on yes.

Self-contained: ``offer_prune`` is all the app calls. The dry run and the prune
are thread workers calling the core (``retention.prune``); the modal only shows
the dry run's words (``format.prune_text``), the same as ``prune --dry-run``.
"""

from __future__ import annotations

from typing import Any, ClassVar

from rich.text import Text
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Static

from flowdrop_tui.core import retention
from flowdrop_tui.core.paths import Layout
from flowdrop_tui.format import prune_text, size_words

GROUP = "prune"


class PruneModal(ModalScreen[bool]):
    """Shows what a prune would delete and why the rest stays; True deletes it."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("y", "answer(True)", "Delete", id="confirm-prune"),
        Binding("escape,n", "answer(False)", "Cancel", id="cancel-prune"),
    ]

    def __init__(self, report: dict[str, Any]) -> None:
        super().__init__(id="prune")
        self.report = report

    @property
    def deletes(self) -> int:
        return len(self.report["delete"]) + len(self.report["orphans"])

    def compose(self) -> ComposeResult:
        text = Text()
        text.append("Prune old runs?\n\n", style="bold")
        text.append(prune_text(self.report))
        text.append(
            "\n\nLive, paused and pinned runs, what each flow picks up next and the newest "
            f"{self.report['keep']} of each flow always stay. Files outside .flowdrop/ "
            "(an agent's own transcripts) are never touched."
        )
        with Vertical(classes="dialog"):
            with VerticalScroll(id="prune-plan"):
                yield Static(text, markup=False)
            with Horizontal(classes="buttons"):
                if self.deletes:
                    label = f"Delete {len(self.report['delete']):,} runs (y)"
                    yield Button(label, variant="error", id="confirm")
                yield Button("Cancel (n)" if self.deletes else "Close (n)", id="cancel")

    def on_mount(self) -> None:
        self.query_one("#cancel", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "confirm" and self.deletes > 0)

    def action_answer(self, answer: bool) -> None:
        self.dismiss(answer and self.deletes > 0)


def offer_prune(app: App[Any], layout: Layout, keep: int = retention.DEFAULT_KEEP) -> None:
    """Dry run (in a thread), ask in a modal, then prune (in a thread) and say what went."""

    def done(result: retention.PruneResult) -> None:
        report = result.as_json()
        words = (
            f"pruned {len(report['delete']):,} runs and {len(report['orphans']):,} "
            f"orphaned transcripts ({size_words(report['bytes'])})"
        )
        if report["skipped"]:
            words += f"; {len(report['skipped'])} changed while pruning and stayed"
        app.notify(words, markup=False)
        for screen in app.screen_stack:  # the header's size: measured again
            refresh = getattr(screen, "read_usage", None)
            if callable(refresh):
                refresh()

    def delete() -> None:
        result = retention.prune(layout, keep)
        app.call_from_thread(done, result)

    def answered(yes: bool | None) -> None:
        if yes:
            app.run_worker(delete, thread=True, group=GROUP, exit_on_error=False)

    def ask(report: dict[str, Any]) -> None:
        app.push_screen(PruneModal(report), answered)

    def dry_run() -> None:
        report = retention.prune(layout, keep, dry_run=True).as_json()
        app.call_from_thread(ask, report)

    app.run_worker(dry_run, thread=True, group=GROUP, exclusive=True, exit_on_error=False)
