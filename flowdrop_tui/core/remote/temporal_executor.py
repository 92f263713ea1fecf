"""Remote mode's executor: runs go to Temporal workers (SPEC §18; docs/decisions.md,
"Runs on Temporal workers").

``start`` and ``resume`` start the key's workflow (``<space>/<key>``, conflict
policy FAIL: a key with an open workflow is ``ALREADY_RUNNING``) and wait on its
``wait_started`` Update for the run to exist on a worker, or for the refusal the
run child met there (the local codes: ``BUDGET_EXHAUSTED``, ``DRIFTED``, …).
``stop`` and ``pause`` of a live run are the ``control`` Update, delivered on the
holding worker through today's verbs; a run that is not live is answered here from
the replica with today's verbs (``PIPELINE_TERMINAL``, ``NO_ACTIVE_PAUSE``, …), and
``stop`` of a paused run closes it through a worker that claims its key, so its
record is written through to PostgreSQL by a holder of the key.
"""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import orjson
from temporalio.api.enums.v1 import PendingActivityState
from temporalio.client import (
    Client,
    WorkflowExecutionStatus,
    WorkflowHandle,
    WorkflowUpdateFailedError,
)
from temporalio.common import WorkflowIDConflictPolicy, WorkflowIDReusePolicy
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.service import RPCError

from flowdrop_tui.core.control import verbs
from flowdrop_tui.core.errors import AlreadyRunningError, FlowdropError, UsageError, error_for
from flowdrop_tui.core.flows.discovery import FlowRef
from flowdrop_tui.core.paths import Layout, check_run_ref
from flowdrop_tui.core.records.event_log import who
from flowdrop_tui.core.records.run_fold import load_run
from flowdrop_tui.core.records.run_info import LIVE, RunInfo, Status
from flowdrop_tui.core.remote import reading
from flowdrop_tui.core.remote.config import RemoteConfig
from flowdrop_tui.core.remote.store import PostgresStore
from flowdrop_tui.core.remote.temporal_client import connect
from flowdrop_tui.core.remote.workflow import (
    CLOSE,
    HEARTBEAT_TIMEOUT,
    RESUME,
    RUN,
    ControlRequest,
    FlowInput,
    FlowKeyWorkflow,
    workflow_id,
)
from flowdrop_tui.core.run.forecast import StartOptions

SETTLE_LIMIT = 10.0  # seconds a run its worker let go of may still read live here
# A workflow task handed to a worker that was just cut off (its poll still open on
# the server) is retried elsewhere only after this; Temporal's default of 10 s made a
# partitioned worker's run show `interrupted` ~18 s after the cut, not ~10 s (the
# partition test measured both). A task is a few milliseconds of work.
WORKFLOW_TASK_TIMEOUT = timedelta(seconds=2)
LOST_START_RETRIES = 3  # starts made again after a worker was lost before the run existed
START_LIMIT = 300.0  # seconds `run` waits for a worker to take the run and create it
WAIT_NOTICE = 3.0  # seconds after which a start no worker has taken is said to wait
TAKEN_EVERY = 1.0  # seconds between looks at whether a worker took the start


class TemporalExecutor:
    """Starts runs on the cluster and carries requests to the worker holding them."""

    remote = True

    def __init__(self, layout: Layout, settings: RemoteConfig) -> None:
        self.layout = layout
        self.settings = settings
        # Told, once, that a start waits for a worker (the CLI: a line on stderr).
        self.say: Callable[[str], None] | None = None
        self.interrupted = ""  # what became of a start Ctrl-C interrupted

    # -- the replica --------------------------------------------------------------------

    def sync(self) -> None:
        """Bring this workspace's replica of the records up to PostgreSQL, as every read
        command does (``reading.synced``: bounded, the pins too; unreachable is exit 4)."""
        reading.synced(self.layout, self.settings)

    # -- start --------------------------------------------------------------------------

    def start(self, ref: FlowRef, options: StartOptions, extra: list[str]) -> dict[str, Any]:
        # PostgreSQL answers first (exit 4 when it does not), and the replica is current
        # for what the run's answer names: a start during an outage is not a worker's
        # failure.
        self.sync()
        args = ["run", ref.key]
        if options.from_run:
            args += ["--from", options.from_run]
        if options.resume:
            args += ["--resume", options.resume]
        if options.fresh:
            args.append("--fresh")
        snapshot = None
        if options.snapshot is not None:
            snapshot = _read_snapshot(options.snapshot)
        request = self._request(RUN, ref.key, [*args, *extra], run=None, snapshot=snapshot)
        return self._start(request)

    def resume(
        self, run_id: str, extra: list[str], *, by: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        self.sync()
        info = verbs.check_resumable(self.layout, run_id)  # the local refusals, from the replica
        if info.key is None:
            raise FlowdropError(f"run {run_id}'s record names no flow key; it cannot be resumed")
        asker = orjson.dumps({**who(), "via": "cli", **(by or {})}).decode()
        args = ["resume", run_id, "--by", asker, *extra]
        return self._start(self._request(RESUME, info.key, args, run=run_id))

    def _request(
        self,
        mode: str,
        key: str,
        args: list[str],
        *,
        run: str | None,
        snapshot: str | None = None,
        by: dict[str, Any] | None = None,
    ) -> FlowInput:
        commit, warnings = self._head(mode)
        self._warnings = warnings
        return FlowInput(
            space=self.settings.space,
            key=key,
            mode=mode,
            args=args,
            commit=commit,
            origin=self._origin(),
            by={**who(), "via": "cli", **(by or {})},
            run=run,
            snapshot=snapshot,
            branch=self._branch(),
        )

    def _start(self, request: FlowInput) -> dict[str, Any]:
        # Resuming or closing a paused run: an open workflow of its key is that run's,
        # letting go of it (the paused event is seen before its child has exited and
        # its worker has shipped the last output): wait for it, as `r` pressed right
        # after `p` must not be refused ALREADY_RUNNING by the run it resumes.
        paused = request.mode in (CLOSE, RESUME)
        answer = self._run_start(request, after_end=paused)
        for _ in range(LOST_START_RETRIES):
            if _code(answer) != "WORKER_LOST":
                break
            # The task went to a worker that was lost before it made the run: most
            # often a poll that a worker cut off from the network left open on the
            # server, which is handed the next task and never answers. Its key was
            # reaped; a start made again goes to a worker that answers.
            self._warnings.append(
                f"a worker was lost taking {request.key} before the run started; started again"
            )
            answer = self._run_start(request, after_end=True)
        error = answer.get("error")
        if isinstance(error, dict):
            raise error_for(str(error.get("code")), str(error.get("message")))
        warnings = [*self._warnings, *(answer.get("warnings") or [])]
        return {**answer, "warnings": warnings}

    def _run_start(self, request: FlowInput, *, after_end: bool) -> dict[str, Any]:
        """``_start_async`` to its end; Ctrl-C while it waits is a ``KeyboardInterrupt``
        that says what became of the start (the CLI's one line, exit 130)."""
        self.interrupted = ""
        try:
            return asyncio.run(self._start_async(request, after_end=after_end))
        except KeyboardInterrupt:
            raise KeyboardInterrupt(self.interrupted) from None

    async def _start_async(self, request: FlowInput, *, after_end: bool = False) -> dict[str, Any]:
        client = await self._client()
        wid = workflow_id(request.space, request.key)
        for attempt in range(2):
            try:
                handle = await client.start_workflow(
                    FlowKeyWorkflow.run,
                    request,
                    id=wid,
                    task_queue=self.settings.task_queue,
                    id_conflict_policy=WorkflowIDConflictPolicy.FAIL,
                    id_reuse_policy=WorkflowIDReusePolicy.ALLOW_DUPLICATE,
                    task_timeout=WORKFLOW_TASK_TIMEOUT,
                )
                break
            except WorkflowAlreadyStartedError:
                # The key's workflow is open. A run that just paused or ended leaves it
                # open for its clean-up (output, commits, worktree): wait for that
                # once. A run still going is the one live run of the key: refused.
                if attempt == 0 and await _winding_down(
                    client, wid, ended=after_end, run_ended=self._run_ended
                ):
                    continue
                raise AlreadyRunningError(self._running_words(request.key, wid)) from None
        waiting = asyncio.ensure_future(handle.execute_update(FlowKeyWorkflow.wait_started))
        # Its failure once cancelled (Ctrl-C, the time limit) is retrieved here: asyncio
        # would print it at exit, ~30 lines of traceback after the one-line answer.
        waiting.add_done_callback(lambda done: done.cancelled() or done.exception())
        try:
            answer: dict[str, Any] = await self._await_start(handle, request, waiting)
        except TimeoutError:
            waiting.cancel()
            await self._withdraw(handle, "no worker took it in time")
            raise FlowdropError(
                f"no worker took {request.key} within {START_LIMIT:.0f} s (task queue "
                f"{self.settings.task_queue}), and the start was withdrawn: nothing runs it "
                f"later; start a worker ({self._worker_hint()}), then run it again"
            ) from None
        except asyncio.CancelledError:
            # Ctrl-C (asyncio.run turns SIGINT into this): a start no worker has taken
            # is withdrawn, so it never runs later, unseen; then the interrupt goes on
            # to the CLI's one line and exit 130.
            waiting.cancel()
            if not await self._taken(handle):
                await self._withdraw(handle, "interrupted before a worker took it")
                self.interrupted = f"the start of {request.key} was withdrawn: nothing runs it"
            else:
                self.interrupted = (
                    f"a worker had already taken {request.key}: its run goes on; see it with "
                    f"flowdrop-tui runs {request.key}, stop it with flowdrop-tui stop RUN"
                )
            raise
        return answer

    async def _await_start(
        self, handle: WorkflowHandle[Any, Any], request: FlowInput, waiting: asyncio.Future[Any]
    ) -> dict[str, Any]:
        """The ``wait_started`` answer; while no worker has taken the start, say once (after
        ``WAIT_NOTICE``) that it waits, on which queue, and how to start a worker."""
        deadline = time.monotonic() + START_LIMIT
        notice_at = time.monotonic() + WAIT_NOTICE
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError
            done, _ = await asyncio.wait({waiting}, timeout=min(TAKEN_EVERY, left))
            if done:
                answer: dict[str, Any] = waiting.result()
                return answer
            if self.say is not None and time.monotonic() >= notice_at:
                if not await self._taken(handle):
                    self.say(
                        f"flowdrop-tui: waiting for a worker to take {request.key} on task "
                        f"queue {self.settings.task_queue} (none has yet); start one with: "
                        f"{self._worker_hint()} — Ctrl-C withdraws the start"
                    )
                notice_at = float("inf")

    def _worker_hint(self) -> str:
        queue = self.settings.task_queue
        where = "" if queue == "flowdrop" else f" --task-queue {queue}"
        return f"flowdrop-tui worker --temporal {self.settings.temporal} --postgres URL{where}"

    async def _taken(self, handle: WorkflowHandle[Any, Any]) -> bool:
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

    async def _withdraw(self, handle: WorkflowHandle[Any, Any], why: str) -> None:
        """Terminate the key's workflow: a start nobody took never runs later."""
        with contextlib.suppress(Exception):  # already closed: nothing left to run
            await handle.terminate(reason=f"flowdrop-tui: {why}")

    def _run_ended(self, run_id: str) -> bool:
        """Whether the records (synced first) say ``run_id`` has stopped: ended or paused."""
        self.sync()
        return load_run(self.layout, run_id).status not in LIVE

    def _running_words(self, key: str, wid: str) -> str:
        """Who holds the key, as PostgreSQL says (the run and its worker), in the
        words of a local ``ALREADY_RUNNING``."""
        try:
            store = PostgresStore(self.settings.postgres, self.settings.space)
            try:
                live = [(r, i) for r, i in store.live_runs().items() if i.get("key") == key]
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
                f"see it with: flowdrop-tui runs {key}; a start waits on task queue "
                f"{self.settings.task_queue} until a worker polls it (flowdrop-tui worker)"
            )
        return f"{key} is already running ({held}); one live run per flow — {how}"

    # -- stop / pause -------------------------------------------------------------------

    def stop(
        self,
        run_id: str,
        *,
        now: bool,
        by: dict[str, Any] | None = None,
        keep_paused: bool = False,
    ) -> verbs.Asked:
        info = self._live_answer(run_id, "stop_now" if now else "stop", by)
        if isinstance(info, verbs.Asked):
            return info
        if info.status == Status.PAUSED and not keep_paused:
            return self._close(run_id, info.key, by)
        # Refuses: it has ended (PIPELINE_TERMINAL), or it is paused and the asker
        # (the UI's escape) never closes a paused run (ALREADY_PAUSED).
        return verbs.stop(self.layout, run_id, now=now, keep_paused=keep_paused)

    def pause(self, run_id: str, *, by: dict[str, Any] | None = None) -> verbs.Asked:
        info = self._live_answer(run_id, "pause", by)
        if isinstance(info, verbs.Asked):
            return info
        return verbs.pause(self.layout, run_id)  # refuses: ended, or already paused

    def _live_answer(
        self, run_id: str, verb: str, by: dict[str, Any] | None
    ) -> verbs.Asked | RunInfo:
        """The holding worker's answer for a live run (PostgreSQL says which runs are
        live, and under which key); else the run's replicated info, for today's verbs
        to answer from (it is not live)."""
        check_run_ref(run_id)
        row = self._row(run_id)
        if row is not None and row.get("live"):
            answer = asyncio.run(self._control(str(row["key"]), verb, by))
            asked = answer.get("asked")
            if isinstance(asked, dict):
                return _asked(asked)
            error = answer.get("error")
            if isinstance(error, dict):
                raise error_for(str(error.get("code")), str(error.get("message")))
        # Not live, or it ended meanwhile: answer from what it left. A run that just
        # ended is cleared live by its worker a moment later (after its last output).
        deadline = time.monotonic() + SETTLE_LIMIT
        while True:
            self.sync()
            info = load_run(self.layout, run_id)
            if info.status not in LIVE or time.monotonic() > deadline:
                break
            time.sleep(0.25)
        if info.status in LIVE:
            raise FlowdropError(
                f"run {run_id} is shown {info.status} but no worker holds it; it shows "
                f"interrupted within {HEARTBEAT_TIMEOUT.total_seconds():.0f} s"
            )
        return info

    def _row(self, run_id: str) -> dict[str, Any] | None:
        store = PostgresStore(self.settings.postgres, self.settings.space)
        try:
            store.ensure_schema()
            return store.run_info(run_id)
        finally:
            store.close()

    async def _control(self, key: str, verb: str, by: dict[str, Any] | None) -> dict[str, Any]:
        client = await self._client()
        handle = client.get_workflow_handle(workflow_id(self.settings.space, key))
        try:
            answer: dict[str, Any] = await handle.execute_update(
                FlowKeyWorkflow.control, ControlRequest(verb, {**who(), "via": "cli", **(by or {})})
            )
        except (RPCError, WorkflowUpdateFailedError):
            return {"ended": True}  # no open workflow for the key: the run is not held
        return answer

    def _close(self, run_id: str, key: str | None, by: dict[str, Any] | None) -> verbs.Asked:
        """``stop`` of a paused run: a worker claims the key and closes it there."""
        if key is None:
            raise FlowdropError(f"run {run_id}'s record names no flow key; it cannot be closed")
        request = self._request(CLOSE, key, ["stop", run_id], run=run_id, by=by)
        answer = self._start(request)
        closed = answer.get("closed")
        if not isinstance(closed, dict):
            raise FlowdropError(f"closing run {run_id} gave no answer")
        self.sync()
        return _asked({**closed, "key": key, "action": closed.get("action")})

    # -- helpers ------------------------------------------------------------------------

    async def _client(self) -> Client:
        return await connect(self.settings.temporal, self.settings.namespace)

    def _head(self, mode: str) -> tuple[str, list[str]]:
        """The commit a worker checks out for a new run (this workspace's HEAD; a resumed
        run goes on from its own pushed commits), and what to warn of."""
        head = _git(self.layout.workspace, "rev-parse", "HEAD")
        if head is None:
            raise UsageError(
                f"remote mode runs a commit, and {self.layout.workspace} has none (not a git "
                "repository, or no commit yet); commit and push first"
            )
        warnings = []
        status = _git(self.layout.workspace, "status", "--porcelain", "--untracked-files=no")
        if status:
            runs = f"runs commit {head[:12]}" if mode == RUN else "goes on from the run's commits"
            warnings.append(
                f"uncommitted changes in {self.layout.workspace} are not on the worker: it {runs}"
            )
        return head, warnings

    def _branch(self) -> str | None:
        """The branch this workspace is on (``None``: a detached HEAD): the run records
        it as its own, though its worker's checkout is detached."""
        return _git(self.layout.workspace, "symbolic-ref", "--quiet", "--short", "HEAD") or None

    def _origin(self) -> str:
        if self.settings.origin:
            return self.settings.origin
        url = _git(self.layout.workspace, "remote", "get-url", "origin")
        if not url:
            raise UsageError(
                "remote mode needs the git origin workers clone from: set `origin` in "
                ".flowdrop/config.toml [remote] or FLOWDROP_ORIGIN, or add a git remote "
                "named origin"
            )
        return url


WIND_DOWN_LIMIT = 60.0  # seconds a start waits for the key's ending workflow to close


async def _winding_down(
    client: Client,
    wid: str,
    *,
    ended: bool = False,
    run_ended: Callable[[str], bool] | None = None,
) -> bool:
    """Whether the key's open workflow only cleans up after its run (``ended``: the
    caller knows its run has stopped; ``run_ended``: asks the records whether the
    workflow's run has — its end is written before its worker sees the child exit);
    if so, wait (up to ``WIND_DOWN_LIMIT``) for it to close."""
    handle = client.get_workflow_handle(wid)
    try:
        if not ended and not await handle.query(FlowKeyWorkflow.winding_down):
            run_id = await handle.query(FlowKeyWorkflow.started_run)
            if run_id is None or run_ended is None:
                return False
            if not await asyncio.to_thread(run_ended, run_id):
                return False
        await asyncio.wait_for(handle.result(), WIND_DOWN_LIMIT)
    except Exception:  # gone meanwhile, or failed: starting again tells
        return True
    return True


def _code(answer: dict[str, Any]) -> str | None:
    error = answer.get("error")
    return str(error.get("code")) if isinstance(error, dict) else None


def _asked(data: dict[str, Any]) -> verbs.Asked:
    return verbs.Asked(
        run=str(data.get("run")),
        key=None if data.get("key") is None else str(data.get("key")),
        action=verbs.Action(str(data.get("action"))),
        round=int(data.get("round") or 0),
    )


def _git(workspace: Path, *args: str) -> str | None:
    try:
        done = subprocess.run(
            ["git", *args], cwd=workspace, capture_output=True, text=True, timeout=30
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def _read_snapshot(path: Path) -> str:
    try:
        return path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"cannot read the snapshot {path}: {exc}") from exc
