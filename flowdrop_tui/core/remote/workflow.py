"""Who runs what: one Temporal workflow per flow key (SPEC §18).

``FlowKeyWorkflow`` has the Workflow ID ``<space>/<key>`` and is started with the
conflict policy FAIL, so the cluster holds at most one open run per key (a second
start is ``ALREADY_RUNNING``). It runs one long, heartbeating activity
(``run_flow``) on the shared task queue; a worker that dies stops heartbeating,
and after ``HEARTBEAT_TIMEOUT`` the workflow runs ``reap`` (the run then shows
``interrupted``). Stop and pause are the ``control`` Update, delivered by a short
activity on the holding worker's own queue. Why the timeouts and the fenced reap
are what they are: docs/decisions.md, "Runs on Temporal workers".

This module runs inside Temporal's workflow sandbox: it imports only the standard
library and ``temporalio``, names activities by string and never reads the clock,
the environment or a file. Its inputs are plain dataclasses, shared with the
activities and the client.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError
from temporalio.exceptions import TimeoutError as ActivityTimeout

# How long a worker may go silent before its run is declared lost (SPEC §18): the
# activity heartbeats every HEARTBEAT_EVERY seconds; past this, the server fails it
# and the workflow reaps the run. Short enough that a dead machine's run shows
# `interrupted` soon; long enough that a worker busy on a loaded machine (2 cores,
# a run child starting) is not declared lost by mistake.
HEARTBEAT_TIMEOUT = timedelta(seconds=8)
HEARTBEAT_EVERY = 1.0
# A run may last a week or more: the activity's only bound is its heartbeat.
RUN_LIMIT = timedelta(days=3650)
DELIVER_LIMIT = timedelta(seconds=20)  # a stop or pause to a holding worker that is gone
# A reap is milliseconds of PostgreSQL work, tried again until it lands (it is safe
# to repeat).
REAP_LIMIT = timedelta(seconds=5)
WORKER_QUEUE_PREFIX = "flowdrop-worker-"
# Whether a worker is alive is its lease in PostgreSQL, renewed every LEASE_EVERY
# seconds: one not renewed for LEASE_GONE is gone (its runs are reaped); one renewed
# since is alive, whatever Temporal says (an outage of the Temporal server times out
# every heartbeat, and must not kill a run: the workflow attends it again).
LEASE_EVERY = 1.0
LEASE_PATCH = "lease-before-reap"
LEASE_GONE = 6.0
HOLDER_LIMIT = timedelta(seconds=15)  # the lease's read: a few ms of PostgreSQL
# How long an attend waits for the holding worker to poll again (after an outage its
# pollers reconnect); doubled per try up to ATTEND_WAIT_MAX, to bound the history.
ATTEND_WAIT = timedelta(seconds=10)
ATTEND_WAIT_MAX = timedelta(minutes=5)

RUN, RESUME, CLOSE = "run", "resume", "close"


@dataclass
class FlowInput:
    """What the client asks of the cluster for one key."""

    space: str
    key: str
    mode: str  # RUN | RESUME | CLOSE (stop of a paused run: its record closed there)
    args: list[str]  # the run child's command line (``run KEY …``, ``resume RUN …``)
    commit: str  # the client's HEAD: what a run checks out (a resume: its own pushed commits)
    origin: str  # the git origin the worker's mirror follows
    by: dict[str, Any] = field(default_factory=dict)  # who asked
    run: str | None = None  # the paused run, for RESUME and CLOSE
    snapshot: str | None = None  # ``run --snapshot FILE``: the file's text (not on the worker)
    branch: str | None = None  # the client's branch (None: detached), recorded by the run
    start: str | None = None  # the request's id in fd_starts (core/remote/start/start_requests.py)
    settled: list[str] = field(default_factory=list)  # runs of the key the client saw stopped


@dataclass
class ControlRequest:
    verb: str  # "stop" | "stop_now" | "pause"
    by: dict[str, Any] = field(default_factory=dict)
    control: str | None = None  # its fd_controls row (core/remote/start/controls.py)


@dataclass
class DeliverInput:
    run: str
    verb: str
    by: dict[str, Any] = field(default_factory=dict)
    control: str | None = None  # the request's fd_controls row, checked by the worker
    space: str = ""  # the run's space: the workflow's, never the requester's


@dataclass
class AttendInput:
    run: str


@dataclass
class HolderInput:
    space: str
    worker: str


@dataclass
class ReapInput:
    space: str
    key: str
    run: str | None
    epoch: int | None = None  # the lost holder's: a late reap leaves a later claim be


def workflow_id(space: str, key: str) -> str:
    return f"{space}/{key}"


@workflow.defn(name="FlowKeyWorkflow")
class FlowKeyWorkflow:
    """One key's run on the cluster, from claim to end (or to its reaping)."""

    def __init__(self) -> None:
        self._started: dict[str, Any] | None = None
        self._epoch: int | None = None  # the key's epoch ``run_flow`` claimed
        self._done = False
        self._child_ended = False
        self._space = ""  # the space of the start this workflow runs

    @workflow.run
    async def run(self, request: FlowInput) -> dict[str, Any]:
        self._space = request.space
        try:
            result: dict[str, Any] = await workflow.execute_activity(
                "run_flow",
                request,
                start_to_close_timeout=RUN_LIMIT,
                heartbeat_timeout=HEARTBEAT_TIMEOUT,
                retry_policy=RetryPolicy(maximum_attempts=1),
                result_type=dict,
            )
        except ActivityError as exc:
            result = await self._lost(request, exc)
        self._done = True
        await workflow.wait_condition(workflow.all_handlers_finished)
        # What ``wait_started`` answered, kept in the result: a forwarder that takes over
        # a start (its first forwarder died) after this closed reads it from here.
        return {**result, "started": self._started}

    async def _lost(self, request: FlowInput, exc: ActivityError) -> dict[str, Any]:
        """``run_flow`` failed or timed out. A run whose worker is alive (its lease in
        PostgreSQL is fresh: the Temporal server, not the worker, was away) is attended
        again on that worker's own queue; a run whose worker is gone, or that failed,
        is reaped: fenced off and no longer live, so it shows `interrupted`."""
        started = self._started or {}
        run_id = started.get("run")
        worker, queue = started.get("worker"), started.get("worker_queue")
        if self._started is None:
            lost = isinstance(exc.cause, ActivityTimeout)  # its heartbeat stopped
            what = "was lost" if lost else "failed"
            self._started = {
                "error": {
                    "code": "WORKER_LOST" if lost else "WORKER_FAILED",
                    "message": f"the worker taking key {request.key} {what} before the "
                    f"run started ({_cause(exc)}); its log says more — run it again",
                },
                "exit": 1,
            }
        cause: ActivityError = exc
        wait = ATTEND_WAIT
        # Histories from before the lease (a workflow that reaped at once) replay as
        # they ran: ``patched`` is False there, True (and recorded) from now on.
        leased = workflow.patched(LEASE_PATCH)
        while (
            leased
            and isinstance(cause.cause, ActivityTimeout)
            and isinstance(run_id, str)
            and isinstance(worker, str)
            and isinstance(queue, str)
        ):
            gone = await workflow.execute_local_activity(
                "holder_gone",
                HolderInput(request.space, worker),
                start_to_close_timeout=HOLDER_LIMIT,
                retry_policy=RetryPolicy(maximum_interval=timedelta(seconds=5)),
                result_type=bool,
            )
            if gone:
                break
            try:
                attended: dict[str, Any] = await workflow.execute_activity(
                    "attend",
                    AttendInput(run_id),
                    task_queue=queue,
                    schedule_to_start_timeout=wait,
                    start_to_close_timeout=RUN_LIMIT,
                    heartbeat_timeout=HEARTBEAT_TIMEOUT,
                    retry_policy=RetryPolicy(maximum_attempts=1),
                    result_type=dict,
                )
            except ActivityError as again:
                cause = again
                wait = min(wait * 2, ATTEND_WAIT_MAX)
                continue
            if attended.get("outcome") != "lost":
                return attended
            break  # a new process of that id: the run is not kept there
        # A local activity: the reap runs on the worker that took this workflow
        # task, which is alive by taking it. A task of its own could be handed to
        # the poll a cut-off worker left open and wait out its timeout first.
        if self._epoch is not None:  # else nothing was claimed: nothing to reap
            await workflow.execute_local_activity(
                "reap",
                ReapInput(request.space, request.key, run_id, self._epoch),
                start_to_close_timeout=REAP_LIMIT,
                retry_policy=RetryPolicy(maximum_interval=timedelta(seconds=5)),
            )
        return {"run": run_id, "outcome": "interrupted", "reason": _cause(cause)}

    def ended(self) -> bool:
        return self._done

    @workflow.signal
    def child_ended(self) -> None:
        """From ``run_flow``: the run's process has ended; only clean-up is left."""
        self._child_ended = True

    @workflow.query
    def winding_down(self) -> bool:
        """True once the run's process has ended (or none was started): a new start of
        the key only has to wait for this workflow to close, it is not refused."""
        return self._child_ended or self._done or "error" in (self._started or {})

    @workflow.query
    def started_run(self) -> str | None:
        """The run this workflow's worker made, once it exists: a client that finds the
        run ended in the records knows the workflow is only cleaning up, even before
        ``child_ended`` arrives (a worker looks at its child about once a second)."""
        started = self._started or {}
        closed = started.get("closed")  # a CLOSE: the paused run it closed
        run = started.get("run") or (closed.get("run") if isinstance(closed, dict) else None)
        return run if isinstance(run, str) else None

    @workflow.signal
    def claimed(self, epoch: int) -> None:
        """From ``run_flow``: the key's epoch it holds, sent before it starts anything."""
        self._epoch = epoch

    @workflow.signal
    def started(self, answer: dict[str, Any]) -> None:
        """From ``run_flow``: the run exists (``run``, ``flow``, ``warnings``,
        ``worker_queue``) or the refusal it met (``error``, ``exit``)."""
        if self._started is None:
            self._started = answer

    @workflow.update
    async def wait_started(self) -> dict[str, Any]:
        """The client's ``run`` waits here for the run to exist, or to be refused."""
        await workflow.wait_condition(lambda: self._started is not None)
        assert self._started is not None
        return self._started

    @workflow.update
    async def control(self, request: ControlRequest) -> dict[str, Any]:
        """Stop or pause, delivered on the holding worker (``{"asked": …}`` or
        ``{"error": …, "exit": …}``); ``{"ended": true}`` once the run is not live
        here, for the client to answer from the records."""
        await workflow.wait_condition(lambda: self._started is not None)
        started = self._started or {}
        queue = started.get("worker_queue")
        if self._done or "error" in started or not isinstance(queue, str):
            return {"ended": True}
        try:
            answer: dict[str, Any] = await workflow.execute_activity(
                "deliver",
                DeliverInput(
                    str(started.get("run")), request.verb, request.by, request.control, self._space
                ),
                task_queue=queue,
                schedule_to_close_timeout=DELIVER_LIMIT,
                retry_policy=RetryPolicy(maximum_attempts=1),
                result_type=dict,
            )
        except ActivityError as exc:
            if self.ended():  # the run ended while the request was on its way
                return {"ended": True}
            return {
                "error": {
                    "code": "WORKER_UNREACHABLE",
                    "message": f"the worker holding run {started.get('run')} did not take "
                    f"the request ({_cause(exc)}); if it died, the run shows interrupted "
                    f"within {int(HEARTBEAT_TIMEOUT.total_seconds())} s",
                },
                "exit": 1,
            }
        return answer


def _cause(exc: BaseException) -> str:
    inner = exc.__cause__ or exc
    return str(inner) or type(inner).__name__
