"""``TypedInput``: a line to type in whose editing keys act in the order they were
typed. Textual inserts a letter as the ``Input`` takes it, but runs a key bound on the
``Input`` (backspace, delete, the arrows, enter…) only once that key has bubbled back
up to the app — so in a burst (tmux's ``send-keys``, a fast typist while runs stream)
``⌫ n o n e ⏎`` became "non": the backspace ran after the letters and took the e,
and enter submitted that. Here the ``Input``'s own bindings run as their key arrives.
"""

from __future__ import annotations

from textual import events
from textual.binding import Binding
from textual.widgets import Input


def _bound_here() -> dict[str, str]:
    """Each key ``Input`` binds → its action (``"backspace"`` → ``"delete_left"``)."""
    actions: dict[str, str] = {}
    for binding in Input.BINDINGS:
        if isinstance(binding, Binding):
            for key in binding.key.split(","):
                actions[key.strip()] = binding.action
    return actions


EDITING = _bound_here()


class TypedInput(Input):
    """An ``Input`` that edits in typing order (the module says why)."""

    async def on_key(self, event: events.Key) -> None:
        action = None if event.is_printable else EDITING.get(event.key)
        if action is None:
            return  # a letter (Input inserts it) or a key for someone else: as before
        event.stop()
        event.prevent_default()
        await self.run_action(action)
