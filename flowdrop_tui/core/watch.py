"""Watch a workspace and say what changed, as domain events (STYLE habit 2).

One ``WorkspaceWatch`` turns file-system changes into ``RunChanged(run_id)``,
``FlowsChanged()`` and ``IndexChanged()``: an event only says what to re-read;
the files stay the source of truth.

What is watched, and why not everything: a workspace may hold 10,000 run
folders, and a recursive watch would put an inotify watch on each of them (and
on their ``sessions/`` and ``requests/``). So the records are watched flat —
the workspace folder (``.flowdrop/`` or ``flows/`` appearing), ``.flowdrop/``
(``index.json``), ``.flowdrop/runs/`` (a run appearing) and the folders of the
few runs being *followed* (live ones, the one on screen) — while ``flows/`` is
small and watched recursively. Changing what is followed starts a new watcher
*before* stopping the old one, so no change falls between the two.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass
from pathlib import Path

from flowdrop_tui.core.errors import FlowdropError
from flowdrop_tui.core.paths import (
    CYCLE,
    FLOWS_DIR,
    OUTPUT,
    RECORDS_DIR,
    RUN_ID_RE,
    SESSIONS,
    STATE,
    Layout,
)
from flowdrop_tui.core.records.listing.queued_starts import QUEUED
from flowdrop_tui.core.records.run_record.liveness import live_pid

# The followed runs' folders (and the records' top folders, watched flat): a change is
# reported after this long without another. watchfiles' default is 50 ms; the UI
# knows which few files it follows, so it waits less and shows an event sooner
# (bench/ui_bench.py (c)). The flows folder, watched recursively, keeps the default.
STEP_MS = 10
FLOWS_STEP_MS = 50
DEBOUNCE_MS = 200  # a run appending without pause is still reported this often
# A process that dies changes no file (the kernel just drops its lock), so the
# followed runs' liveness is also asked (F_GETLK, no file is touched) this often.
LIVENESS_EVERY = 1.0


@dataclass(frozen=True)
class RunChanged:
    """Something in a run's record changed (or the run appeared): re-read that run."""

    run_id: str


@dataclass(frozen=True)
class FlowsChanged:
    """A file under ``flows/`` changed: discover and describe the flows again."""


@dataclass(frozen=True)
class IndexChanged:
    """``.flowdrop/index.json`` changed: a run started, paused, resumed or ended."""


WorkspaceEvent = RunChanged | FlowsChanged | IndexChanged

_RUN_FILES = frozenset({CYCLE, STATE, SESSIONS, OUTPUT})  # OUTPUT: the Run pane follows it
_RESTART = object()


@dataclass
class _Watcher:
    stop: asyncio.Event
    task: asyncio.Task[None]


class WorkspaceWatch:
    """Domain events for one workspace; ``follow`` says which run folders to watch."""

    def __init__(
        self, layout: Layout, *, step_ms: int = STEP_MS, debounce_ms: int = DEBOUNCE_MS
    ) -> None:
        self.workspace = layout.workspace.resolve()
        self.root = self.workspace / RECORDS_DIR
        self.runs = self.root / "runs"
        self.flows = self.workspace / FLOWS_DIR
        self.step_ms = step_ms
        self.debounce_ms = debounce_ms
        self._followed: frozenset[str] = frozenset()
        self._watching: frozenset[str] = frozenset()
        self._queue: asyncio.Queue[object] | None = None
        self._records_stale = False
        self._flows_stale = False
        self._holders: dict[str, int | None] = {}
        self._checked = 0.0

    # -- what to watch ----------------------------------------------------------------

    def follow(self, run_ids: Iterable[str]) -> None:
        """Watch exactly these runs' folders closely (besides the workspace-wide changes)."""
        wanted = frozenset(run_id for run_id in run_ids if RUN_ID_RE.match(run_id))
        if wanted != self._followed:
            self._followed = wanted
            self._records_stale = True
            if self._queue is not None:
                self._queue.put_nowait(_RESTART)

    def _record_paths(self) -> tuple[list[str], frozenset[str]]:
        paths = [self.workspace]
        if self.root.is_dir():
            paths.append(self.root)
        if self.runs.is_dir():
            paths.append(self.runs)
        watching = frozenset(r for r in self._followed if (self.runs / r).is_dir())
        paths.extend(self.runs / run_id for run_id in sorted(watching))
        return [str(p) for p in paths], watching

    # -- the watchers -------------------------------------------------------------------

    def _start(self, paths: list[str], *, recursive: bool, step_ms: int | None = None) -> _Watcher:
        from watchfiles import awatch  # here: the watch starts after the UI's first frame

        assert self._queue is not None
        queue = self._queue
        stop = asyncio.Event()

        async def pump() -> None:
            try:
                async for changes in awatch(
                    *paths,
                    watch_filter=None,
                    step=step_ms or self.step_ms,
                    debounce=self.debounce_ms,
                    stop_event=stop,
                    recursive=recursive,
                    ignore_permission_denied=True,
                ):
                    queue.put_nowait(changes)
            except FileNotFoundError:  # a path went away between looking and watching
                if recursive:
                    self._flows_stale = True
                else:
                    self._records_stale = True
                queue.put_nowait(_RESTART)
            except Exception as exc:  # the watch itself failed: tell the reader
                queue.put_nowait(exc)

        return _Watcher(stop, asyncio.get_running_loop().create_task(pump()))

    async def _replace(self, old: _Watcher | None, new: _Watcher | None) -> None:
        await asyncio.sleep(0)  # let the new watcher register before the old one stops
        if old is not None:
            old.stop.set()

    async def events(self) -> AsyncIterator[list[WorkspaceEvent]]:
        """Batches of domain events, deduplicated within a batch, for as long as iterated."""
        self._queue = asyncio.Queue()
        records: _Watcher | None = None
        flows: _Watcher | None = None
        self._records_stale = self._flows_stale = True
        try:
            while True:
                resync: list[WorkspaceEvent] = []
                if self._records_stale:
                    self._records_stale = False
                    paths, watching = self._record_paths()
                    new = self._start(paths, recursive=False)
                    await self._replace(records, new)
                    records = new
                    for run_id in sorted(watching - self._watching):
                        # Read once now (whatever happened before it was watched), and note
                        # who holds it, so that a death from here on is seen as a change.
                        self._holders[run_id] = live_pid(self.runs / run_id)
                        resync.append(RunChanged(run_id))
                    self._watching = watching
                if self._flows_stale:
                    self._flows_stale = False
                    new_flows = None
                    if self.flows.is_dir():
                        new_flows = self._start(
                            [str(self.flows)], recursive=True, step_ms=FLOWS_STEP_MS
                        )
                    await self._replace(flows, new_flows)
                    flows = new_flows
                if resync:
                    yield resync
                try:
                    item = await asyncio.wait_for(self._queue.get(), LIVENESS_EVERY)
                except TimeoutError:
                    item = _RESTART  # quiet for a while: only the liveness check below
                died = self._liveness_changes()
                if died:
                    yield died
                if item is _RESTART:
                    continue
                if isinstance(item, Exception):
                    raise FlowdropError(f"live updates stopped: {item}") from item
                assert isinstance(item, set)
                events = self._translate(path for _, path in item)
                if events:
                    yield events
        finally:
            for watcher in (records, flows):
                if watcher is not None:
                    watcher.stop.set()
                    watcher.task.cancel()
                    with contextlib.suppress(asyncio.CancelledError, Exception):
                        await watcher.task
            self._queue = None
            self._watching = frozenset()

    def _liveness_changes(self) -> list[WorkspaceEvent]:
        """RunChanged for each followed run whose holder changed (died, or was resumed)."""
        now = time.monotonic()
        if now - self._checked < LIVENESS_EVERY:
            return []
        self._checked = now
        changed: list[WorkspaceEvent] = []
        holders: dict[str, int | None] = {}
        for run_id in sorted(self._watching):
            holders[run_id] = live_pid(self.runs / run_id)
            if run_id in self._holders and self._holders[run_id] != holders[run_id]:
                changed.append(RunChanged(run_id))
        self._holders = holders
        return changed

    # -- paths to events ------------------------------------------------------------------

    def _translate(self, paths: Iterable[str]) -> list[WorkspaceEvent]:
        found: dict[WorkspaceEvent, None] = {}  # ordered and without duplicates
        for raw in paths:
            event = self._event_for(Path(raw))
            if event is not None:
                found[event] = None
        return list(found)

    def _event_for(self, path: Path) -> WorkspaceEvent | None:
        parent = path.parent
        if parent == self.workspace:
            if path.name == RECORDS_DIR:
                self._records_stale = True
                return IndexChanged()
            if path.name == FLOWS_DIR:
                self._flows_stale = True
                return FlowsChanged()
            return None
        if parent == self.root:
            if path.name == "runs":
                self._records_stale = True
                return IndexChanged()
            # queued.json: the starts waiting for a worker (remote mode) came or went
            return IndexChanged() if path.name in ("index.json", QUEUED) else None
        if parent == self.runs:
            if not RUN_ID_RE.match(path.name):
                return None
            if path.name in self._followed and path.name not in self._watching:
                # A followed run's folder appeared after it was followed (remote mode: a
                # run launched here reaches this replica a moment after its launch
                # answered): watch it now, or its later writes would go unseen.
                self._records_stale = True
            return RunChanged(path.name)
        if parent.parent == self.runs and RUN_ID_RE.match(parent.name):
            return RunChanged(parent.name) if path.name in _RUN_FILES else None
        if path.is_relative_to(self.flows):
            rel = path.relative_to(self.flows).parts
            if any(part == "__pycache__" for part in rel) or path.suffix in (".pyc", ".pyo"):
                return None
            return FlowsChanged()
        return None
