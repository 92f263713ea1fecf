"""A start forwarded, from its workflow's side: which workflow took a request (a
forwarder that died left it), the ``wait_started`` Update waited on for the run (or the
refusal met on its worker), the client's withdrawal watched meanwhile, and the words
for a key another run holds (``StartWaits``; ``StartForwarder`` is one).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from typing import Any

from temporalio.api.enums.v1 import PendingActivityState
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowHandle

from flowdrop_tui.core.errors import FlowdropError
from flowdrop_tui.core.remote.postgres.store import PostgresStore
from flowdrop_tui.core.remote.start.start_requests import TAKEN, WITHDRAWN, StartTable
from flowdrop_tui.core.remote.workflow import FlowInput, FlowKeyWorkflow

WATCH_EVERY = 1.0  # seconds between looks at whether the client withdrew a start
MEMO = "flowdrop_start"  # the workflow's memo field naming the request it was started for


class StartWaits:
    """Waiting on the workflow a start was forwarded to."""

    client: Client
    url: str
    queue: str
    untaken: Callable[[], None] | None
    notice_after: float
    _table: StartTable

    async def _taken_by(
        self, request_id: str, wid: str
    ) -> WorkflowHandle[Any, Any] | dict[str, Any] | None:
        """The workflow whose ``run_flow`` took the request (a forwarder that died left
        the request to this one): its handle while it is open, else what it answered
        (its result keeps it); ``None`` when none took it — or when the one that did was
        lost before the run existed, and the request is made takeable again."""
        state, _, taker = await asyncio.to_thread(self._table.look_whole, request_id)
        if state != TAKEN or taker is None:
            return None
        handle = self.client.get_workflow_handle(wid, run_id=taker)
        try:
            described = await handle.describe()
            if described.status == WorkflowExecutionStatus.RUNNING:
                return handle
            result = await handle.result()
        except Exception:
            result = None
        started = result.get("started") if isinstance(result, dict) else None
        if isinstance(started, dict) and not started.get("superseded"):
            return started  # WORKER_LOST included: the caller starts it again
        await asyncio.to_thread(self._table.retake, request_id)
        return None

    async def _ours(self, wid: str, request_id: str) -> WorkflowHandle[Any, Any] | None:
        handle = self.client.get_workflow_handle(wid)
        try:
            described = await handle.describe()
            memo = await described.memo()
        except Exception:
            return None
        if described.status != WorkflowExecutionStatus.RUNNING or memo.get(MEMO) != request_id:
            return None
        return self.client.get_workflow_handle(wid, run_id=described.run_id)

    async def _await_started(
        self, request_id: str, handle: WorkflowHandle[Any, Any]
    ) -> dict[str, Any] | None:
        """The ``wait_started`` answer; ``None`` once the client withdrew the start (the
        workflow then terminated: nothing runs it later)."""
        waiting = asyncio.ensure_future(handle.execute_update(FlowKeyWorkflow.wait_started))
        # Its failure once cancelled is retrieved here, not printed at exit.
        waiting.add_done_callback(lambda done: done.cancelled() or done.exception())
        try:
            return await self._watch_started(request_id, handle, waiting)
        except asyncio.CancelledError:
            # Cancelled (a client's Ctrl-C, a worker stopping): the Update's own task is
            # ended here, not left for asyncio.run's shutdown to print as unhandled.
            waiting.cancel()
            with contextlib.suppress(BaseException):
                await waiting
            raise

    async def _watch_started(
        self, request_id: str, handle: WorkflowHandle[Any, Any], waiting: asyncio.Future[Any]
    ) -> dict[str, Any] | None:
        notice_at = time.monotonic() + self.notice_after
        while True:
            done, _ = await asyncio.wait({waiting}, timeout=WATCH_EVERY)
            if done:
                answer: dict[str, Any] = waiting.result()
                return answer
            if self.untaken is not None and time.monotonic() >= notice_at:
                notice_at = float("inf")
                if not await _taken(handle):
                    self.untaken()
            state, _ = await asyncio.to_thread(self._table.look, request_id)
            if state == WITHDRAWN and not await _taken(handle):
                waiting.cancel()
                with contextlib.suppress(Exception):  # already closed: nothing left to run
                    await handle.terminate(reason="flowdrop-tui: its client withdrew the start")
                return None

    def _running_words(self, request: FlowInput, wid: str) -> str:
        """Who holds the key, as PostgreSQL says (the run and its worker), in the
        words of a local ``ALREADY_RUNNING``."""
        try:
            store = PostgresStore(self.url, request.space)
            try:
                live = [(r, i) for r, i in store.live_runs().items() if i.get("key") == request.key]
            finally:
                store.close()
        except FlowdropError:
            live = []
        if live:
            run_id, info = live[-1]
            held = f"run {run_id} on worker {info.get('worker')}"
            how = f"stop it with: flowdrop-tui stop {run_id}"
        else:
            held = f"workflow {wid}: a start no worker has taken yet, or a run ending"
            how = (
                f"see it with: flowdrop-tui runs {request.key}; a start waits on task queue "
                f"{self.queue} until a worker polls it (flowdrop-tui worker)"
            )
        return f"{request.key} is already running ({held}); one live run per flow — {how}"


async def _taken(handle: WorkflowHandle[Any, Any]) -> bool:
    """Whether a worker took the start: its ``run_flow`` started, or the workflow is
    past it (closed). Unknown (Temporal not answering) counts as taken: nothing is
    withdrawn on a guess."""
    try:
        described = await handle.describe()
    except Exception:
        return True
    if described.status != WorkflowExecutionStatus.RUNNING:
        return True
    scheduled = PendingActivityState.PENDING_ACTIVITY_STATE_SCHEDULED
    return any(a.state != scheduled for a in described.raw_description.pending_activities)
