"""The one seam between local and remote mode, chosen once per process.

A face (the CLI's ``main``, the UI's start, ``serve``'s child — which is the CLI's
``main`` again) calls ``choose(layout)`` once and from then on asks the ``Mode`` it got:
start and resume a run (a foreground one here, or elsewhere and followed:
``started_elsewhere``), carry stop and pause to it, bring the records up to date
before a read, diff a round, follow a run's output, pin, prune, name the store,
follow the records live while a view is open, and close. The faces never import
``core.remote`` and never ask "am I remote?" (an import-linter contract holds the
first).

``LocalMode`` is today's code: a detached child on this machine (``control.launch``)
and requests through the run's folder (``control.verbs``); reads need nothing first.
``RemoteMode`` (``core/remote/remote_mode.py``, imported only when the workspace is
configured for it) puts runs on Temporal workers and keeps a replica of the
PostgreSQL records in the ordinary file layout, so every read stays the local one.
This is celery's ``app.backend`` chosen once, with a null backend for "none".
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from flowdrop_tui.core.errors import UsageError
from flowdrop_tui.core.paths import Layout

if TYPE_CHECKING:  # each verb imports what it runs: `stop` never loads the launch side
    from flowdrop_tui.core import retention
    from flowdrop_tui.core.control import verbs
    from flowdrop_tui.core.flows.discovery import FlowRef
    from flowdrop_tui.core.run.forecast import StartOptions

# Set in a run child's environment by the worker that launched it: that process IS
# the run (or closes one) and runs it as local code does, whatever the config says;
# its record writes go through to PostgreSQL (the mirror, installed by ``choose``).
REMOTE_RUN_ENV = "FLOWDROP_REMOTE_RUN"
_run_child = False  # this process is such a run child (its variable already taken)


class LiveFeed(Protocol):
    """The records kept current from elsewhere while a view is open (remote mode's
    replica following PostgreSQL); ``problem()`` says in one line why it is not."""

    def start(self) -> None: ...

    def stop(self) -> None: ...

    def problem(self) -> str | None: ...


class Mode(Protocol):
    """What the faces ask of the mode. Answers are the core's data; refusals are
    ``FlowdropError``s with the same codes in both modes."""

    layout: Layout

    @property
    def store_label(self) -> str:
        """Where the records come from, for the UI's top line ("" on this machine)."""
        ...

    @property
    def poll_every(self) -> float:
        """Seconds between looks at a run a command waits on (``stop --wait``)."""
        ...

    def start(
        self,
        ref: FlowRef,
        options: StartOptions,
        extra: list[str],
        *,
        say: Callable[[str], None] | None = None,
    ) -> dict[str, Any]:
        """Start ``ref`` in the background: ``{"run", "flow", "warnings"}`` once it exists,
        or the refusal it met (the class that owns its code: ``errors.error_for``).
        ``say``: told once if the start waits (remote: for a worker to take it); Ctrl-C
        meanwhile withdraws it (``KeyboardInterrupt``, its text what became of it)."""
        ...

    def resume(
        self,
        run_id: str,
        extra: list[str],
        *,
        by: dict[str, Any] | None = None,
        say: Callable[[str], None] | None = None,
    ) -> dict[str, Any]: ...

    def started_elsewhere(self, start: Callable[[], dict[str, Any]]) -> dict[str, Any] | None:
        """A foreground ``run``/``resume``: ``None`` when it runs in this process (local
        mode: ``start`` is not called), else ``start()``'s answer — the run was started
        elsewhere (remote: on a worker), to be followed from here."""
        ...

    def round_diff(self, run_id: str, number: int | None = None) -> dict[str, Any]:
        """SPEC §20: what one round of ``run_id`` changed (``core.round_diff``); what it
        left uncommitted is looked for only where runs run in this working tree."""
        ...

    def answer(
        self, run_id: str, answer: str, *, gate: str | None = None, by: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        """SPEC §21: answer the run's open question (or ``gate``) and resume it:
        ``{"run", "flow", "gate", "answer", "warnings"}``, or the refusal."""
        ...

    def stop(
        self,
        run_id: str,
        *,
        now: bool,
        by: dict[str, Any] | None = None,
        keep_paused: bool = False,
    ) -> verbs.Asked: ...

    def pause(self, run_id: str, *, by: dict[str, Any] | None = None) -> verbs.Asked: ...

    def sync(self, *, run_refs: bool = False, run: str | None = None) -> list[str]:
        """Bring the records read here up to date; the problems met, as warnings
        (``run_refs``: also the commits runs made elsewhere, ``run``: only that run's).
        Unreachable: exit 4."""
        ...

    def following_output(self, run_id: str) -> contextlib.AbstractContextManager[Any]:
        """While following ``run_id``'s output: yields ``held()``, true while something
        elsewhere still holds the run (and may still ship lines)."""
        ...

    def pin(self, run_id: str) -> bool: ...

    def unpin(self, run_id: str) -> bool: ...

    def prune(
        self,
        keep: int,
        older_than: float | None = None,
        *,
        dry_run: bool = False,
        include_replaced: bool = False,
    ) -> retention.PruneResult: ...

    def inbox(self) -> list[dict[str, Any]]:
        """SPEC §21: what waits on a person (``core.inbox.items``), sending the notices
        no one has sent yet only where this process is the one to send them (local: the
        first viewer sends a died run's; remote: the worker holding a run sends them)."""
        ...

    def notice_problems(self) -> list[str]:
        """What is wrong with the notice settings this process would send by
        (``.flowdrop/config.toml [notify]``); none where workers send the notices."""
        ...

    def grant(
        self, role: str, dbrole: str, space: str | None, *, revoke: bool = False
    ) -> dict[str, Any]:
        """``remote grant``: make ``dbrole`` a ``role`` (``revoke``: no longer) in
        ``space`` (None: this workspace's); local mode has no roles and refuses."""
        ...

    def live_feed(self) -> LiveFeed | None:
        """A feed to run while a view is open, or None when the files here are the
        records themselves (the workspace watch sees every change)."""
        ...

    @property
    def exit_without_teardown(self) -> bool:
        """Whether the process must leave through ``os._exit`` once its answer is out
        (Temporal's client leaves threads running that an interpreter teardown can
        crash under: exit 0 turned into -11; docs/decisions.md)."""
        ...


class LocalMode:
    """Runs on this machine; the files under ``.flowdrop/`` are the records."""

    store_label = ""
    poll_every = 0.1
    exit_without_teardown = False

    def __init__(self, layout: Layout) -> None:
        self.layout = layout

    def start(
        self,
        ref: FlowRef,
        options: StartOptions,
        extra: list[str],
        *,
        say: Callable[[str], None] | None = None,
    ) -> dict[str, Any]:
        from flowdrop_tui.core.control import launch

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
        self,
        run_id: str,
        extra: list[str],
        *,
        by: dict[str, Any] | None = None,
        say: Callable[[str], None] | None = None,
    ) -> dict[str, Any]:
        from flowdrop_tui.core.control import launch

        return launch.launch_resume(self.layout, run_id, by=by, extra=extra)

    def started_elsewhere(self, start: Callable[[], dict[str, Any]]) -> dict[str, Any] | None:
        return None  # the foreground run is this process

    def round_diff(self, run_id: str, number: int | None = None) -> dict[str, Any]:
        from flowdrop_tui.core.round_diff import round_diff

        return round_diff(self.layout, run_id, number, worktree=True)

    def answer(
        self, run_id: str, answer: str, *, gate: str | None = None, by: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        from flowdrop_tui.core.control import gates, launch

        found = gates.check_answer(self.layout, run_id, answer, gate)
        started = launch.launch_answer(self.layout, run_id, found["gate"], answer, by=by)
        return {**started, "gate": found["gate"], "answer": answer}

    def stop(
        self,
        run_id: str,
        *,
        now: bool,
        by: dict[str, Any] | None = None,
        keep_paused: bool = False,
    ) -> verbs.Asked:
        from flowdrop_tui.core.control import verbs

        return verbs.stop(self.layout, run_id, now=now, by=by, keep_paused=keep_paused)

    def pause(self, run_id: str, *, by: dict[str, Any] | None = None) -> verbs.Asked:
        from flowdrop_tui.core.control import verbs

        return verbs.pause(self.layout, run_id, by=by)

    def sync(self, *, run_refs: bool = False, run: str | None = None) -> list[str]:
        return []

    @contextlib.contextmanager
    def following_output(self, run_id: str) -> Iterator[Any]:
        yield lambda: False

    def pin(self, run_id: str) -> bool:
        from flowdrop_tui.core.records.listing import pins

        return pins.pin(self.layout, run_id)

    def unpin(self, run_id: str) -> bool:
        from flowdrop_tui.core.records.listing import pins

        return pins.unpin(self.layout, run_id)

    def prune(
        self,
        keep: int,
        older_than: float | None = None,
        *,
        dry_run: bool = False,
        include_replaced: bool = False,
    ) -> retention.PruneResult:
        from flowdrop_tui.core import retention

        return retention.prune(
            self.layout, keep, older_than, dry_run=dry_run, include_replaced=include_replaced
        )

    def inbox(self) -> list[dict[str, Any]]:
        from flowdrop_tui.core import inbox

        return inbox.items(self.layout, send=True)

    def notice_problems(self) -> list[str]:
        from flowdrop_tui.core.control import notify

        return notify.settings(self.layout).problems

    def grant(
        self, role: str, dbrole: str, space: str | None, *, revoke: bool = False
    ) -> dict[str, Any]:
        from flowdrop_tui.core.errors import UsageError

        raise UsageError(
            "`remote grant`: this workspace is in local mode, which has no roles (who can "
            "write its .flowdrop/ may do everything); configure [remote] in "
            ".flowdrop/config.toml first"
        )

    def live_feed(self) -> LiveFeed | None:
        return None


def choose(layout: Layout) -> Mode:
    """The mode of this process, decided once: local unless the workspace is configured
    for remote mode (``.flowdrop/config.toml`` ``[remote]`` or ``FLOWDROP_*``). A run
    child a worker started is local (its writes go through the mirror that
    ``install_run_mirror`` put in place), whatever the config it inherited says."""
    if _run_child or os.environ.get(REMOTE_RUN_ENV):
        return LocalMode(layout)
    if not _may_be_remote(layout):
        return _local(layout)
    from flowdrop_tui.core.remote import config  # only what may configure it: read it

    settings = config.load(layout)
    if settings is None:
        return _local(layout)
    from flowdrop_tui.core.remote.remote_mode import RemoteMode  # temporalio, psycopg

    return RemoteMode(layout, settings)


def lanes_on_origin(layout: Layout) -> bool:
    """Whether lanes here run on workers, their branches pushed to the origin (SPEC
    §23): remote mode, as ``choose`` decides it, without opening a connection. What
    ``land`` passes to ``core/lanes/fetching.fetch_lane`` (the core below cannot ask)."""
    if _run_child or os.environ.get(REMOTE_RUN_ENV) or not _may_be_remote(layout):
        return False
    from flowdrop_tui.core.remote import config

    return config.load(layout) is not None


def _local(layout: Layout) -> LocalMode:
    """The workspace's local mode; starts queued while it was remote are not its own."""
    from flowdrop_tui.core.records.listing import queued_starts

    queued_starts.forget(layout)
    return LocalMode(layout)


def _may_be_remote(layout: Layout) -> bool:
    """Whether anything could configure remote mode here: a ``config.toml`` under
    ``.flowdrop/`` or a ``FLOWDROP_*`` variable. Without either, ``config.load`` would
    answer ``None`` having read nothing, so local mode loads no module of
    ``core.remote`` (tests/house/test_boundary.py); with either, ``config.load`` decides."""
    if any(name.startswith("FLOWDROP_") and value for name, value in os.environ.items()):
        return True
    return os.path.lexists(layout.config)


def space_notify(
    layout: Layout, given: Sequence[str] = (), unset: Sequence[str] = ()
) -> tuple[str, dict[str, Any]]:
    """``remote config notify [KEY=VALUE …] [--unset KEY]``: the space and its notice
    settings in PostgreSQL, changed first when asked (docs/remote.md, "Notices"); whatever
    this process's mode, as ``worker`` is. Local mode has none: its ``[notify]`` is in
    ``.flowdrop/config.toml``."""
    from flowdrop_tui.core.remote import config

    settings = config.load(layout)
    if settings is None:
        raise UsageError(
            "remote config notify: this workspace is in local mode (no [remote] in "
            ".flowdrop/config.toml, no FLOWDROP_POSTGRES); its notices are set in "
            ".flowdrop/config.toml [notify]"
        )
    from flowdrop_tui.core.remote.postgres import notify_settings, spaces  # psycopg

    changes = notify_settings.assignments(given)
    settings, _ = spaces.settle(settings)  # the space its runs are under, as every verb's
    return settings.space, notify_settings.change(settings, changes, unset)


def install_run_mirror() -> None:
    """In a run child a worker started (``REMOTE_RUN_ENV``), write every record through
    to PostgreSQL from the first write on — before anything else, even a usage error's
    answer, so nothing the run writes stays on this machine alone."""
    global _run_child
    if os.environ.get(REMOTE_RUN_ENV):
        from flowdrop_tui.core.remote.daemon.write_through import install_from_env  # psycopg

        install_from_env()
        # A ticket file's variable is gone once read (nothing the flow starts has it):
        # this process is still the run child.
        _run_child = _run_child or not os.environ.get(REMOTE_RUN_ENV)


def preload_run_mirror() -> None:
    """In a worker's warm run process (``flowdrop_tui/warm_run.py``), before its run is
    handed over: load what ``install_run_mirror`` installs (the write-through mirror
    and its PostgreSQL driver), so the run's start does not pay for it."""
    from flowdrop_tui.core.remote.daemon import write_through  # noqa: F401  (psycopg)


def serve_worker(
    layout: Layout | None,
    say: Callable[[str], None],
    ready: Callable[[dict[str, Any]], None] | None = None,
    **flags: Any,
) -> int:
    """``flowdrop-tui worker``: poll the cluster for runs until SIGTERM/SIGINT (remote
    mode's daemon, whatever this workspace's mode; ``flags`` as
    ``config.worker_config`` takes them). Leave through ``os._exit`` after it, as
    after any use of Temporal's client (``exit_without_teardown``)."""
    import asyncio

    from flowdrop_tui.core.remote import config  # temporalio, psycopg
    from flowdrop_tui.core.remote.daemon import worker

    found = config.worker_config(layout, **flags)
    settings = worker.WorkerSettings(
        temporal=found.temporal,
        namespace=found.namespace,
        task_queue=found.task_queue,
        worker_id=found.worker_id,
        home=found.home,
        max_runs=found.max_runs,
        access=worker.PostgresAccess(found.postgres, found.home),
        spaces=found.spaces,
        origins=found.origins,
    )
    return asyncio.run(worker.serve(settings, say, ready))
