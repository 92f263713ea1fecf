"""Prune from the command palette: the dry run first, in a modal; delete only on yes.

Self-contained: ``offer_prune`` is all the app calls. The dry run and the prune
are thread workers calling the mode's prune (``Mode.prune``: ``retention.prune``
locally; in remote mode the verdicts over the replica, the deletion in PostgreSQL —
never the replica's folders alone); the modal only shows the dry run's words
(``format.prune_text``), the same as ``prune --dry-run``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from rich.text import Text
from textual.app import App, ComposeResult
from textual.binding import BindingType
from textual.containers import VerticalScroll

from flowdrop_tui.core import retention
from flowdrop_tui.format import prune_text, size_words
from flowdrop_tui.tui.screens.confirm_modal import ConfirmModal, answer_bindings, ask
from flowdrop_tui.tui.user_writes import user_write

if TYPE_CHECKING:
    from flowdrop_tui.core.mode import Mode

GROUP = "prune"


class PruneModal(ConfirmModal):
    """Shows what a prune would delete and why the rest stays; True deletes it (and with
    nothing to delete there is only a close button: every answer is False)."""

    BINDINGS: ClassVar[list[BindingType]] = answer_bindings("prune", "Delete")

    def __init__(self, report: dict[str, Any]) -> None:
        deletes = len(report["delete"]) + len(report["orphans"])
        body = Text()
        body.append(prune_text(report))
        body.append(
            "\n\nLive, paused and pinned runs, what each flow picks up next and the newest "
            f"{report['keep']} of each flow always stay. Files outside .flowdrop/ "
            "(an agent's own transcripts) are never touched."
        )
        super().__init__(
            "Prune old runs?",
            body,
            confirm=f"Delete {len(report['delete']):,} runs (y)" if deletes else None,
            variant="error",
            cancel="Cancel (n)" if deletes else "Close (n)",
            focus="cancel",
            id="prune",
        )
        self.report = report

    @property
    def deletes(self) -> int:
        return len(self.report["delete"]) + len(self.report["orphans"])

    def compose_question(self) -> ComposeResult:
        with VerticalScroll(id="prune-plan"):
            yield from super().compose_question()


def offer_prune(app: App[Any], mode: Mode, keep: int = retention.DEFAULT_KEEP) -> None:
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

    @user_write
    def delete() -> None:
        result = mode.prune(keep, dry_run=False)
        app.call_from_thread(done, result)

    def answered(yes: bool | None) -> None:
        if yes:
            app.run_worker(delete, thread=True, group=GROUP, exit_on_error=False)

    def show(report: dict[str, Any]) -> None:
        ask(app, PruneModal(report), answered)  # not over a question already open

    def dry_run() -> None:
        report = mode.prune(keep, dry_run=True).as_json()
        app.call_from_thread(show, report)

    app.run_worker(dry_run, thread=True, group=GROUP, exclusive=True, exit_on_error=False)
