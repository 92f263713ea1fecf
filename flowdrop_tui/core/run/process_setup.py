"""The process a run executes in, set up for it and put back afterwards: its working
folder, where its prints go, and its signal handlers."""

from __future__ import annotations

import contextlib
import io
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TextIO

from flowdrop_tui.core.run.signals import RunSignals


class Tee(io.TextIOBase):
    """A foreground run's prints: to the terminal and to ``output.log``."""

    def __init__(self, *targets: TextIO) -> None:
        self._targets = targets

    def write(self, text: str) -> int:
        for target in self._targets:
            try:
                target.write(text)
                target.flush()
            except (OSError, ValueError):
                pass
        return len(text)

    def flush(self) -> None:
        for target in self._targets:
            with contextlib.suppress(OSError, ValueError):
                target.flush()

    def isatty(self) -> bool:
        return False


@contextlib.contextmanager
def process_setup(
    workspace: Path, capture: TextIO | None, output: TextIO, signals: RunSignals
) -> Iterator[None]:
    """Run in ``workspace``; prints to ``output.log`` (and ``capture``, a foreground
    run's terminal); requests and signals handled by ``signals``. All put back after."""
    cwd = os.getcwd()
    saved = (sys.stdout, sys.stderr)
    os.chdir(workspace)
    try:
        if capture is not None:
            sys.stdout = Tee(capture, output)
            sys.stderr = Tee(saved[1], output)
        signals.install()
        try:
            yield
        finally:
            signals.uninstall()
    finally:
        sys.stdout, sys.stderr = saved
        with contextlib.suppress(OSError):
            os.chdir(cwd)
