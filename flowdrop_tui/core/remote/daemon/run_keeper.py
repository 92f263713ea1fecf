"""A run a worker keeps, whoever attends it: its output shipped to PostgreSQL, its
commits pushed, its liveness cleared once it ends, its worktree parked or removed
(``RunKeeper``); what a worker holds of a run (``Holding``) and how it reaches a
space's records (``StoreAccess``). The run outlives a lost activity: the workflow
attends it again (``WorkerActivities.attend``).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import time
from dataclasses import dataclass
from pathlib import Path
from subprocess import Popen
from typing import Any, Protocol

from temporalio import activity

from flowdrop_tui.core.control import process
from flowdrop_tui.core.errors import FlowdropError
from flowdrop_tui.core.paths import Layout
from flowdrop_tui.core.remote.daemon.worktrees import MirrorWorktrees
from flowdrop_tui.core.remote.daemon.write_through import RunTicket, ship_output
from flowdrop_tui.core.remote.postgres.store import PostgresStore
from flowdrop_tui.core.remote.remote_errors import Fenced, StoreUnreachableError
from flowdrop_tui.core.remote.workflow import HEARTBEAT_EVERY

PUSH_EVERY = 5.0  # seconds between looks at a run's HEAD (its commits pushed when it moved)
SHIP_RETRY = 60.0  # seconds an ended run's last output is retried against an unreachable store


RunStore = PostgresStore  # what a worker calls of the record store


class StoreAccess(Protocol):
    """How a worker reaches the records of a space: open them, replicate them into a
    worktree, and tell a run child how to write through to them."""

    def open(self, space: str) -> RunStore: ...

    def sync(self, layout: Layout, store: RunStore) -> None: ...

    url: str  # the PostgreSQL URL, for the run child's ticket

    def child_env(
        self, space: str, key: str, epoch: int, worker: str, tickets: Path
    ) -> dict[str, str]: ...


@dataclass
class Holding:
    """A run this worker holds: where it runs and its process."""

    run: str
    tree: Path
    child: Popen[bytes]
    shipped: int  # bytes of its output.log the store holds
    child_ended: asyncio.Future[int]  # set once the child ended and its liveness is cleared
    done: asyncio.Future[int]  # set once its worktree is let go: its exit status


def _pool(space: str) -> str:
    """The parked worktrees a run of ``space`` may take: its replica is the space's."""
    return hashlib.sha256(space.encode()).hexdigest()[:16]


class RunKeeper:
    """The keeping of a worker's runs (``WorkerActivities`` is one)."""

    worker_id: str
    access: StoreAccess
    runs: dict[str, Holding]
    finished: dict[str, int]  # ended, not yet attended to

    async def _attend(self, holding: Holding) -> dict[str, Any]:
        """Heartbeat for a run this worker keeps until it has ended; its outcome.

        Cancelled (the server timed this activity out while it could not be reached,
        or the worker is stopping) it lets the run go on: the keeper holds it, the
        workflow attends it again, and the key's epoch in PostgreSQL decides whether
        it may still write."""
        info = activity.info()
        handle = activity.client().get_workflow_handle(info.workflow_id or "")
        while not holding.child_ended.done():
            activity.heartbeat()
            await asyncio.wait({holding.child_ended}, timeout=HEARTBEAT_EVERY)
        with contextlib.suppress(Exception):  # only lets a new start wait, not fail
            await handle.signal("child_ended")
        while not holding.done.done():
            activity.heartbeat()
            await asyncio.wait({holding.done}, timeout=HEARTBEAT_EVERY)
        try:
            code = holding.done.result()  # the keeper's failure, raised here
        except Fenced as exc:
            # Expected (the run was reaped, or its key bumped): an outcome, not a
            # failure the SDK would log with a traceback. Its key's epoch moved on, so
            # there is nothing left to reap.
            self.finished.pop(holding.run, None)
            return {"run": holding.run, "outcome": "fenced", "reason": exc.message}
        self.finished.pop(holding.run, None)
        return {"run": holding.run, "outcome": "ended", "exit": code}

    async def _keep(
        self, holding: Holding, store: RunStore, key: str, epoch: int, source: MirrorWorktrees
    ) -> None:
        """The run's life here, whoever attends it: ship its output, push its commits,
        clear its liveness once it ends, keep its commits, park its worktree (warm for
        the next run of the space) or, ended by a signal or a failure here, remove it."""
        outcome: BaseException | int
        by_itself = False  # the child exited (no signal ended it) and its keeping went well
        try:
            code = await self._watch(holding, store, key, epoch, source)
            await asyncio.to_thread(store.clear_live, key, epoch, holding.run)
            holding.child_ended.set_result(code)
            outcome = code
            by_itself = code >= 0
        except BaseException as exc:
            # Fenced, the store gone past SHIP_RETRY, the worker stopping: the run must
            # not go on writing unheld. Fencing makes any write it still tries harmless;
            # this stops it using the machine.
            process.kill_group(holding.child.pid)
            outcome = exc
        finally:
            with contextlib.suppress(FlowdropError):
                await asyncio.to_thread(source.keep, holding.tree, holding.run)
            if by_itself:
                # Ended by itself: every record write it made reached PostgreSQL, so its
                # worktree's replica is current (up to the feed): warm for the next run.
                await asyncio.to_thread(source.park, holding.tree, _pool(store.space))
            else:
                await asyncio.to_thread(source.release, holding.tree)
            await asyncio.to_thread(store.close)
            self.runs.pop(holding.run, None)
        if not holding.child_ended.done():
            holding.child_ended.set_result(-1)
        if isinstance(outcome, BaseException):
            holding.done.set_exception(
                outcome if isinstance(outcome, Exception) else FlowdropError(str(outcome))
            )
            holding.done.exception()  # retrieved: an unattended failure is not logged
        else:
            holding.done.set_result(outcome)
            self.finished[holding.run] = outcome

    async def _watch(
        self, holding: Holding, store: RunStore, key: str, epoch: int, source: MirrorWorktrees
    ) -> int:
        """Until the child ends: ship its output every second, push its commits."""
        run_dir = Layout(holding.tree).run_dir(holding.run)
        ticket = RunTicket(self.access.url, store.space, key, epoch, self.worker_id)
        shipped = holding.shipped
        pushed_at = time.monotonic()
        ended_at: float | None = None
        while True:
            code = holding.child.poll()
            if code is not None and ended_at is None:
                ended_at = time.monotonic()
            try:
                shipped = await asyncio.to_thread(ship_output, store, ticket, run_dir, shipped)
            except StoreUnreachableError:
                # Sent again next beat (an append at an offset lands once); an ended
                # run's last output is given SHIP_RETRY before the activity fails.
                if ended_at is not None and time.monotonic() - ended_at > SHIP_RETRY:
                    raise
                await asyncio.sleep(HEARTBEAT_EVERY)
                continue
            if code is not None:
                return code
            if time.monotonic() - pushed_at > PUSH_EVERY:
                pushed_at = time.monotonic()
                with contextlib.suppress(FlowdropError):
                    await asyncio.to_thread(source.keep, holding.tree, holding.run)
            await asyncio.sleep(HEARTBEAT_EVERY)
