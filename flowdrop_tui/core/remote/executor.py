"""The ``Executor`` seam (issue 17): who starts a run and carries stop/pause to it.

``LocalExecutor`` is today's code, unchanged: a detached child on this machine
(``control.launch``) and requests through the run's folder (``control.verbs``).
``TemporalExecutor`` (``temporal_executor.py``, imported only in remote mode) puts
the run on a worker and carries requests there. The CLI asks ``executor_for``.
"""

from __future__ import annotations

import os
from typing import Any, Protocol

from flowdrop_tui.core.control import launch, verbs
from flowdrop_tui.core.flows.discovery import FlowRef
from flowdrop_tui.core.paths import Layout
from flowdrop_tui.core.remote import config
from flowdrop_tui.core.run.forecast import StartOptions

# Set in a run child's environment by the worker that launched it: that process IS
# the run (or closes one) and runs it as local code does, whatever the config says.
REMOTE_RUN_ENV = "FLOWDROP_REMOTE_RUN"


# Set while a command uses the Temporal client (cleared by the CLI per command): the
# CLI then leaves through os._exit once its answer is out (docs/decisions.md).
TEMPORAL_USED: list[bool] = []


class Executor(Protocol):
    remote: bool

    def start(self, ref: FlowRef, options: StartOptions, extra: list[str]) -> dict[str, Any]:
        """Start ``ref`` in the background: ``{"run", "flow", "warnings"}`` once it exists,
        or the refusal it met (``LaunchRefused``, with its code and exit status)."""
        ...

    def resume(
        self, run_id: str, extra: list[str], *, by: dict[str, Any] | None = None
    ) -> dict[str, Any]: ...

    def stop(
        self,
        run_id: str,
        *,
        now: bool,
        by: dict[str, Any] | None = None,
        keep_paused: bool = False,
    ) -> verbs.Asked: ...

    def pause(self, run_id: str, *, by: dict[str, Any] | None = None) -> verbs.Asked: ...


class LocalExecutor:
    """Runs on this machine: exactly what ``run --detach``, ``stop`` and ``pause`` did."""

    remote = False

    def __init__(self, layout: Layout) -> None:
        self.layout = layout

    def start(self, ref: FlowRef, options: StartOptions, extra: list[str]) -> dict[str, Any]:
        return launch.launch_run(
            self.layout,
            ref.folder,
            ref.key,
            from_run=options.from_run,
            resume=options.resume,
            snapshot=options.snapshot,
            fresh=options.fresh,
            extra=extra,
        )

    def resume(
        self, run_id: str, extra: list[str], *, by: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        return launch.launch_resume(self.layout, run_id, by=by, extra=extra)

    def stop(
        self,
        run_id: str,
        *,
        now: bool,
        by: dict[str, Any] | None = None,
        keep_paused: bool = False,
    ) -> verbs.Asked:
        return verbs.stop(self.layout, run_id, now=now, by=by, keep_paused=keep_paused)

    def pause(self, run_id: str, *, by: dict[str, Any] | None = None) -> verbs.Asked:
        return verbs.pause(self.layout, run_id, by=by)


def executor_for(layout: Layout) -> Executor:
    """Local unless the workspace is configured for remote mode (and this process is
    not itself a run a worker started)."""
    if os.environ.get(REMOTE_RUN_ENV):
        return LocalExecutor(layout)
    settings = config.load(layout)
    if settings is None:
        return LocalExecutor(layout)
    from flowdrop_tui.core.remote.temporal_executor import TemporalExecutor

    return TemporalExecutor(layout, settings)
