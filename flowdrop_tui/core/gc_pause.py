"""The cyclic garbage collector paused while a process starts, and resumed once.

Starting the UI allocates some 50,000 objects (the modules, Textual's classes and
stylesheet, the first frame's widgets) that live as long as the process: the
collector's passes over them before the first frame are pure cost — about 20 ms of
a 0.3 s start (bench/README.md, (a)). ``cli.main`` pauses it before it parses; a
verb that is not the UI resumes it before it runs (a flow may run for hours), and
the UI once its first frame is out and the panes under it are mounted — not at the
frame itself: the first pass after the pause walks everything start-up made
(~80,000 objects, 20-45 ms holding the GIL), and Textual's writer thread would wait
on it to put that frame on the terminal. Only a pause taken here is undone here: a
process that had disabled the collector itself keeps it disabled."""

from __future__ import annotations

import gc

_paused = False


def pause() -> None:
    """Stop collecting until ``resume`` (nothing, if the collector is already off)."""
    global _paused
    if gc.isenabled():
        gc.disable()
        _paused = True


def resume() -> None:
    """Collect again, if ``pause`` stopped it; idempotent."""
    global _paused
    if _paused:
        _paused = False
        gc.enable()
