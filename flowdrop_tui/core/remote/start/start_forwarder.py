"""A worker's side of a start asked through PostgreSQL (``start_requests``): it takes
the requests of its namespace and task queue, starts the key's workflow with each
(conflict policy FAIL: a key with an open workflow is ``ALREADY_RUNNING``), waits on
its ``wait_started`` Update for the run to exist on a worker (or for the refusal met
there), and writes the answer into the request's row for its client.

The start is made here, on a process that has Temporal's SDK loaded already, never
in the client (docs/decisions.md, "Remote mode: a start asked through PostgreSQL"),
and with it what goes with a start: a start made again after a worker was
lost before the run existed (``WORKER_LOST``), a key whose workflow only cleans up
after its run waited for, the one-line ``ALREADY_RUNNING`` naming who holds the key,
and a start its client withdrew terminated. A forwarder that dies mid-start leaves
its rows to another (``StartTable.claim``, once its lease lapsed): the workflow it
finds open carries the request's id in its memo and is waited on, never doubled, and
``run_flow`` takes a request once (``StartTable.take``).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from temporalio.client import Client, WorkflowHandle
from temporalio.common import WorkflowIDConflictPolicy, WorkflowIDReusePolicy
from temporalio.exceptions import WorkflowAlreadyStartedError

from flowdrop_tui.core.errors import AlreadyRunningError, FlowdropError
from flowdrop_tui.core.remote.postgres.store import PostgresStore
from flowdrop_tui.core.remote.start.start_requests import (
    ASK_CHANNEL,
    CLOSE,
    RESUME,
    WAIT_NOTICE,
    StartTable,
)
from flowdrop_tui.core.remote.start.start_waits import MEMO, StartWaits, _taken
from flowdrop_tui.core.remote.workflow import (
    LEASE_GONE,
    FlowInput,
    FlowKeyWorkflow,
    workflow_id,
)

# A workflow task handed to a worker that was just cut off (its poll still open on
# the server) is retried elsewhere only after this; Temporal's default of 10 s made a
# partitioned worker's run show `interrupted` ~18 s after the cut, not ~10 s (the
# partition test measured both). A task is a few milliseconds of work.
WORKFLOW_TASK_TIMEOUT = timedelta(seconds=2)
LOST_START_RETRIES = 3  # starts made again after a worker was lost before the run existed
SUPERSEDED_LOOKS = 3  # looks for the workflow that took a request another one found taken
WIND_DOWN_LIMIT = 60.0  # seconds a start waits for the key's ending workflow to close
CLAIM_EVERY = 1.0  # seconds between looks for requests no notification announced
SWEEP_EVERY = 3600.0  # seconds: rows answered or withdrawn longer ago are deleted


class StartForwarder(StartWaits):
    """Forwards the start requests of one namespace and task queue while it runs (the
    waiting on the workflow a start went to is ``StartWaits``')."""

    def __init__(
        self,
        client: Client,
        url: str,
        namespace: str,
        queue: str,
        token: str,
        say: Callable[[str], None],
    ) -> None:
        self.client, self.url = client, url
        self.namespace, self.queue, self.token = namespace, queue, token
        self.say = say
        self._forwarding: dict[str, asyncio.Task[None]] = {}
        self._table = StartTable(PostgresStore(url, ""))
        # Told once when a start this forwarder waits on has not been taken after
        # WAIT_NOTICE s (a client forwarding its own start: the waiting line).
        self.untaken: Callable[[], None] | None = None
        # Seconds after the workflow's start that ``untaken`` is told: a client that has
        # already waited WAIT_NOTICE s on the table says it at once (docs/remote.md).
        self.notice_after = WAIT_NOTICE

    async def serve(self) -> None:
        """Until cancelled: take requests as they are announced (LISTEN), and every
        ``CLAIM_EVERY`` s those a dead forwarder left."""
        woken = asyncio.Event()
        self._loop = asyncio.get_running_loop()
        threading.Thread(target=self._listen, args=(woken,), daemon=True).start()
        swept = 0.0
        try:
            while True:
                if time.monotonic() - swept > SWEEP_EVERY:
                    swept = time.monotonic()
                    with contextlib.suppress(FlowdropError):
                        await asyncio.to_thread(self._table.sweep, SWEEP_EVERY)
                await self._claim()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(woken.wait(), CLAIM_EVERY)
                woken.clear()
        finally:
            self._stop_listening = True
            for task in list(self._forwarding.values()):
                task.cancel()
            await asyncio.to_thread(self._table.store.close)

    _stop_listening = False

    def _listen(self, woken: asyncio.Event) -> None:
        """On a thread: wake the claiming loop on each ``NOTIFY fd_starts``; a lost
        connection is made again (the loop's own looks go on meanwhile)."""
        while not self._stop_listening:
            try:
                conn = PostgresStore(self.url, "").connect()
            except FlowdropError:
                time.sleep(CLAIM_EVERY)
                continue
            try:
                conn.execute(f"LISTEN {ASK_CHANNEL}")
                while not self._stop_listening:
                    for note in conn.notifies(timeout=CLAIM_EVERY, stop_after=1):
                        if note.payload == self.queue:
                            self._loop.call_soon_threadsafe(woken.set)
            except Exception:  # the connection broke: listen again
                pass
            finally:
                with contextlib.suppress(Exception):
                    conn.close()

    async def _claim(self) -> None:
        try:
            claimed = await asyncio.to_thread(
                self._table.claim, self.namespace, self.queue, self.token, LEASE_GONE
            )
        except FlowdropError:
            return  # PostgreSQL away: the lease's renewal says so; looked at again soon
        for request_id, given in claimed:
            if request_id in self._forwarding:
                continue
            task = asyncio.create_task(self._forward(request_id, given))
            self._forwarding[request_id] = task
            task.add_done_callback(self._forwarded)

    async def forward_own(self, request_id: str, request: dict[str, Any]) -> dict[str, Any]:
        """A client's own start, forwarded by the client itself (no worker took it from
        PostgreSQL: none runs, none reaches PostgreSQL, or none knows the table yet): the
        answer, written into the row as well, so a worker that takes the row over later
        finds it answered."""
        answer = await self._start(
            request_id, FlowInput(**{k: v for k, v in request.items() if k in _FIELDS})
        )
        if answer is None:
            raise FlowdropError(f"the start of {request.get('key')} was withdrawn")
        await asyncio.to_thread(self._table.answer, request_id, answer)
        return answer

    async def withdraw_own(self, space: str, key: str) -> None:
        """A client's own start given up (Ctrl-C, its time limit; its row withdrawn
        first): the key's workflow, if no run_flow took it, is terminated, so nothing
        runs it later and the key is free at once."""
        handle = self.client.get_workflow_handle(workflow_id(space, key))
        if await _taken(handle):
            return
        with contextlib.suppress(Exception):  # already closed: nothing left to run
            await handle.terminate(reason="flowdrop-tui: withdrawn before a worker took it")

    def _forwarded(self, task: asyncio.Task[None]) -> None:
        for request_id, forwarding in list(self._forwarding.items()):
            if forwarding is task:
                del self._forwarding[request_id]

    async def _forward(self, request_id: str, given: Any) -> None:
        try:
            request = FlowInput(**{k: v for k, v in dict(given).items() if k in _FIELDS})
            answer = await self._start(request_id, request)
        except FlowdropError as exc:
            answer = {**exc.as_json(), "exit": exc.exit_code}
        except asyncio.CancelledError:
            return  # this worker is stopping: the row goes to another once its lease lapses
        except Exception as exc:  # a bug or the SDK failing: the client hears it, in a line
            answer = {
                "error": {
                    "code": "WORKER_FAILED",
                    "message": f"the worker forwarding the start of {given.get('key')} "
                    f"failed ({type(exc).__name__}: {exc}); its log says more — run it again",
                },
                "exit": 1,
            }
        if answer is None:
            return  # withdrawn by its client: no one waits for an answer
        await self._answer(request_id, answer)

    async def _answer(self, request_id: str, answer: dict[str, Any]) -> None:
        while True:
            try:
                await asyncio.to_thread(self._table.answer, request_id, answer)
                return
            except FlowdropError:  # PostgreSQL away: the client waits for it too
                await asyncio.sleep(CLAIM_EVERY)

    async def _start(self, request_id: str, request: FlowInput) -> dict[str, Any] | None:
        """The run's answer, the start made again after a worker lost before the run
        existed; ``None`` once its client withdrew it."""
        # Resuming or closing a paused run: an open workflow of its key is that run's,
        # letting go of it (the paused event is seen before its child has exited and
        # its worker has shipped the last output): wait for it, as `r` pressed right
        # after `p` must not be refused ALREADY_RUNNING by the run it resumes.
        after_end = request.mode in (CLOSE, RESUME)
        warnings: list[str] = []
        lost = superseded = 0
        while True:
            answer = await self._start_once(request_id, request, after_end=after_end)
            if answer is None:
                return None
            if answer.get("superseded"):
                # Another workflow of this request took it first: its answer is read
                # from it (``_taken_by``) on the next look.
                superseded += 1
                if superseded <= SUPERSEDED_LOOKS:
                    continue
                raise FlowdropError(
                    f"the start of {request.key} was taken by another workflow whose answer "
                    f"could not be read; see it with flowdrop-tui runs {request.key}"
                )
            if _code(answer) == "WORKER_LOST" and lost < LOST_START_RETRIES:
                # The task went to a worker that was lost before it made the run: most
                # often a poll that a worker cut off from the network left open on the
                # server, which is handed the next task and never answers. Its key was
                # reaped; a start made again goes to a worker that answers.
                lost += 1
                if not await asyncio.to_thread(self._table.retake, request_id):
                    return None  # withdrawn meanwhile
                warnings.append(
                    f"a worker was lost taking {request.key} before the run started; started again"
                )
                after_end = True
                continue
            return {**answer, "warnings": [*warnings, *(answer.get("warnings") or [])]}

    async def _start_once(
        self, request_id: str, request: FlowInput, *, after_end: bool
    ) -> dict[str, Any] | None:
        wid = workflow_id(request.space, request.key)
        taken = await self._taken_by(request_id, wid)
        if isinstance(taken, dict):  # its workflow closed: what it answered
            return taken
        if taken is not None:  # a run_flow took it: its workflow answers
            return await self._await_started(request_id, taken)
        handle: WorkflowHandle[Any, Any] | None = None
        for attempt in range(2):
            try:
                handle = await self.client.start_workflow(
                    FlowKeyWorkflow.run,
                    request,
                    id=wid,
                    task_queue=self.queue,
                    id_conflict_policy=WorkflowIDConflictPolicy.FAIL,
                    id_reuse_policy=WorkflowIDReusePolicy.ALLOW_DUPLICATE,
                    task_timeout=WORKFLOW_TASK_TIMEOUT,
                    memo={MEMO: request_id},
                )
                break
            except WorkflowAlreadyStartedError:
                handle = await self._ours(wid, request_id)
                if handle is not None:  # started for this request by a forwarder that died
                    break
                # The key's workflow is open. A run that just paused or ended leaves it
                # open for its clean-up (output, commits, worktree): wait for that
                # once. A run still going is the one live run of the key: refused.
                if attempt == 0 and await _winding_down(
                    self.client, wid, ended=after_end, settled=request.settled
                ):
                    continue
                raise AlreadyRunningError(
                    await asyncio.to_thread(self._running_words, request, wid)
                ) from None
        assert handle is not None
        return await self._await_started(request_id, handle)


_FIELDS = set(FlowInput.__dataclass_fields__)


async def _winding_down(
    client: Client, wid: str, *, ended: bool = False, settled: list[str] | None = None
) -> bool:
    """Whether the key's open workflow only cleans up after its run (``ended``: the
    client knows its run has stopped; ``settled``: runs its replica shows stopped — its
    end is written before its worker sees the child exit); if so, wait (up to
    ``WIND_DOWN_LIMIT``) for it to close."""
    handle = client.get_workflow_handle(wid)
    try:
        if not ended and not await handle.query(FlowKeyWorkflow.winding_down):
            run_id = await handle.query(FlowKeyWorkflow.started_run)
            if run_id is None or run_id not in (settled or []):
                return False
        await asyncio.wait_for(handle.result(), WIND_DOWN_LIMIT)
    except Exception:  # gone meanwhile, or failed: starting again tells
        return True
    return True


def _code(answer: dict[str, Any]) -> str | None:
    error = answer.get("error")
    return str(error.get("code")) if isinstance(error, dict) else None
