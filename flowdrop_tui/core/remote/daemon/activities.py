"""What a worker does for the workflow: run a flow, deliver a request, reap.

``run_flow`` is one long activity per run: claim the key (a new epoch) → a worktree
of the asked commit (a resume: of the run's own pushed commits) with a replica of
the records → the same child a local ``run --detach`` starts (``launch``), with the
mirror's settings (and the client's branch) in its env → mark
it live → tell the workflow ``started`` → heartbeat while the child lives, shipping
its ``output.log`` and pushing its commits → clear its liveness, keep its commits,
remove the worktree. ``deliver`` runs on the holding worker's own queue and calls
today's verbs there, so every refusal is the local one. ``reap`` runs after a
worker was lost: it fences the key and clears the run's liveness.
Why: docs/decisions.md, "Runs on Temporal workers".
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import socket
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from subprocess import Popen
from typing import Any, Protocol

import orjson
from temporalio import activity

from flowdrop_tui.core.control import process, verbs
from flowdrop_tui.core.errors import AlreadyPausedError, FlowdropError, UsageError, error_for
from flowdrop_tui.core.git import BRANCH_ENV, run_ref
from flowdrop_tui.core.paths import OUTPUT, Layout
from flowdrop_tui.core.remote.config import space_of_origin
from flowdrop_tui.core.remote.daemon.warm import WarmChild
from flowdrop_tui.core.remote.daemon.worktrees import MirrorWorktrees
from flowdrop_tui.core.remote.daemon.write_through import (
    ENV_VAR,
    TICKETS,
    RunTicket,
    drop_ticket,
    flow_env,
    ship_output,
)
from flowdrop_tui.core.remote.postgres.store import PostgresStore
from flowdrop_tui.core.remote.remote_errors import (
    Fenced,
    NotPermittedError,
    NotServedError,
    StoreUnreachableError,
)
from flowdrop_tui.core.remote.start import controls
from flowdrop_tui.core.remote.start.start_requests import StartTable
from flowdrop_tui.core.remote.workflow import (
    CLOSE,
    HEARTBEAT_EVERY,
    LEASE_GONE,
    RESUME,
    RUN,
    WORKER_QUEUE_PREFIX,
    AttendInput,
    DeliverInput,
    FlowInput,
    HolderInput,
    ReapInput,
)
from flowdrop_tui.core.run.start_plan import pick_up_source

PUSH_EVERY = 5.0  # seconds between looks at a run's HEAD (its commits pushed when it moved)
SHIP_RETRY = 60.0  # seconds an ended run's last output is retried against an unreachable store
CLOSE_LIMIT = 120.0  # seconds a `stop` closing a paused run may take

WARM = "warm"  # the folder of the worker's home a warm run process waits in
WARM_AFTER = 1.0  # seconds after a start's answer before the next warm process starts


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


@dataclass
class WorkerActivities:
    """The activities of one worker process (its id names its own task queue)."""

    worker_id: str
    home: Path
    access: StoreAccess
    runs: dict[str, Holding] = field(default_factory=dict)
    finished: dict[str, int] = field(default_factory=dict)  # ended, not yet attended to
    _keepers: set[asyncio.Task[None]] = field(default_factory=set)
    _warm: WarmChild | None = None
    _warming: set[asyncio.Task[None]] = field(default_factory=set)
    # ``worker --space``/``--origin``: what it serves (empty: any); origins normalised
    # as spaces are (``config.space_of_origin``), so ssh and https URLs of one match
    spaces: tuple[str, ...] = ()
    origins: tuple[str, ...] = ()

    @property
    def warm(self) -> WarmChild:
        """The run process kept ready for the next start (``core/remote/daemon/warm.py``)."""
        if self._warm is None:
            self._warm = WarmChild(self.home / WARM)
        return self._warm

    def warm_up(self) -> None:
        """Start the warm run process for the next start (the worker, once polling)."""
        self.warm.prepare(flow_env(os.environ, self.access.url))

    async def let_go(self, limit: float) -> None:
        """Kill the runs still kept here (a worker stopping past its drain) and wait
        up to ``limit`` s for their keepers to clear their liveness and worktrees;
        the warm run process too."""
        await asyncio.to_thread(self.warm.close)
        for holding in list(self.runs.values()):
            process.kill_group(holding.child.pid)
        if self._keepers:
            await asyncio.wait(set(self._keepers), timeout=limit)

    @property
    def own_queue(self) -> str:
        return WORKER_QUEUE_PREFIX + self.worker_id

    # -- run_flow ---------------------------------------------------------------------

    @activity.defn(name="run_flow")
    async def run_flow(self, request: FlowInput) -> dict[str, Any]:
        try:
            store = await asyncio.to_thread(self.access.open, request.space)
        except FlowdropError as exc:  # PostgreSQL down (exit 4) or refusing: nothing claimed
            handle = activity.client().get_workflow_handle(activity.info().workflow_id or "")
            refusal = error_for(exc.code, f"worker {self.worker_id}: {exc.message}")
            await handle.signal("started", _refusal(refusal))
            return {"run": None, "outcome": "refused", "code": exc.code}
        handed = False  # once a run child exists, its keeper owns the store
        try:
            made = await self._run(request, store)
            if isinstance(made, dict):
                return made
            handed = True
        finally:
            if not handed:
                await asyncio.to_thread(store.close)
        return await self._attend(made)

    async def _run(self, request: FlowInput, store: RunStore) -> dict[str, Any] | Holding:
        info = activity.info()
        handle = activity.client().get_workflow_handle(info.workflow_id or "")
        source = MirrorWorktrees(request.origin, self.home)
        try:
            check_request(request)
            self.check_served(request)
            await asyncio.to_thread(self.check_asker, store, request)
            taken = request.start is None or await asyncio.to_thread(
                StartTable(store).take, request.start, info.workflow_run_id or ""
            )
        except FlowdropError as exc:
            await handle.signal("started", _refusal(exc))
            return {"run": None, "outcome": "refused", "code": exc.code}
        if not taken:  # withdrawn, or taken by another workflow of the same request
            await handle.signal("started", {"superseded": True})
            return {"run": None, "outcome": "superseded"}
        try:
            epoch = await asyncio.to_thread(store.claim, request.key, worker=self.worker_id)
        except FlowdropError as exc:
            await handle.signal("started", _refusal(exc))
            return {"run": None, "outcome": "refused", "code": exc.code}
        # Before anything is started under it: if this worker is lost from here on,
        # the workflow reaps exactly this epoch (and no later claim's).
        await handle.signal("claimed", epoch)
        name = _tree_name(request.space, request.key, epoch)
        tree: Path | None = None
        held = False  # True once a run child exists: its keeper takes over the tree
        try:
            checked, warnings = await asyncio.to_thread(_checkout, source, request, name)
            tree = checked
            layout = Layout(tree)
            await asyncio.to_thread(self.access.sync, layout, store)
            env = self.access.child_env(
                request.space, request.key, epoch, self.worker_id, self.home / TICKETS
            )
            if request.branch:  # the run records the client's branch, not a detached HEAD
                env[BRANCH_ENV] = request.branch
            args = request.args
            if request.snapshot is not None:  # the client's file, written in the worktree
                given = tree / ".flowdrop" / "given-snapshot.json"
                given.parent.mkdir(parents=True, exist_ok=True)
                given.write_text(request.snapshot)
                args = [*args, "--snapshot", str(given)]
            if request.mode == CLOSE:
                try:
                    answer = await asyncio.to_thread(_close_paused, layout, args, env)
                finally:
                    drop_ticket(env)
                await handle.signal("started", answer)
                return {"run": request.run, "outcome": "closed", "exit": answer.get("exit")}
            # What the record's output.log holds already, for each run the child may go
            # on in (a `run FLOW` continues a paused run in its own record, as `resume`):
            # the shipping of the child's output starts there, never at byte 0.
            held_output = {run: _size(layout.run_dir(run)) for run in _continuable(layout, request)}
            base = {k: v for k, v in env.items() if k not in (ENV_VAR, BRANCH_ENV)}
            try:
                message, child = await asyncio.to_thread(
                    self.warm.launch, layout, args, env=env, base=base
                )
            finally:
                drop_ticket(env)  # read by now (first thing the child does), or never
                warming = asyncio.create_task(self._warm_again(base))
                self._warming.add(warming)
                warming.add_done_callback(self._warming.discard)
            if isinstance(message.get("error"), dict):
                await asyncio.to_thread(child.wait)
                await handle.signal("started", message)
                return {"run": None, "outcome": "refused", "code": message["error"].get("code")}
            held = True
        except (FlowdropError, OSError) as exc:
            refusal = exc if isinstance(exc, FlowdropError) else FlowdropError(str(exc))
            await asyncio.to_thread(store.reap, request.key, None, epoch)  # nothing runs: free it
            await handle.signal("started", _refusal(refusal))
            return {"run": None, "outcome": "refused", "code": refusal.code}
        finally:
            if tree is not None and not held:
                await asyncio.to_thread(source.release, tree)
        loop = asyncio.get_running_loop()
        run_id = str(message["run"])
        shipped = held_output.get(run_id, 0)
        holding = Holding(run_id, tree, child, shipped, loop.create_future(), loop.create_future())
        self.runs[run_id] = holding
        # The run is kept by this worker, not by the activity: an activity the Temporal
        # server lost (an outage past the heartbeat timeout) leaves it going, and the
        # workflow re-attends it here (``attend``) once it finds this worker alive.
        keeper = asyncio.create_task(self._keep(holding, store, request.key, epoch, source))
        self._keepers.add(keeper)
        keeper.add_done_callback(self._keepers.discard)
        try:
            await asyncio.to_thread(
                store.set_live,
                request.key,
                epoch,
                run_id,
                worker=self.worker_id,
                host=socket.gethostname(),
                pid=child.pid,
            )
            await handle.signal(
                "started",
                {
                    "run": run_id,
                    "flow": message.get("flow"),
                    "warnings": [*warnings, *(message.get("warnings") or [])],
                    "worker": self.worker_id,
                    "worker_queue": self.own_queue,
                },
            )
        except BaseException:
            # Not live, or the workflow never heard of it: it must not go on unheld
            # (its keeper clears up once it has ended).
            process.kill_group(child.pid)
            raise
        return holding

    def check_served(self, request: FlowInput) -> None:
        """``NotServedError`` for a space or origin this worker was not told to serve
        (its answer, written into the start's row, is what the client prints)."""
        if self.spaces and request.space not in self.spaces:
            raise NotServedError(
                f"worker {self.worker_id} refused the start of {request.key}: it serves the "
                f"spaces {', '.join(self.spaces)}, not {request.space} (worker --space); "
                "start one that serves it, or on a task queue of the space's own"
            )
        if self.origins and space_of_origin(request.origin) not in self.origins:
            raise NotServedError(
                f"worker {self.worker_id} refused the start of {request.key}: it runs code "
                f"only from the origins it was told to serve (worker --origin), not "
                f"{request.origin}"
            )

    def check_asker(self, store: RunStore, request: FlowInput) -> None:
        """``NotPermittedError`` unless the database role that asked for the start may
        start runs in its space (``fd_may_operate``). Who asked is the ``fd_starts``
        row's ``asked_by``, set by PostgreSQL: a workflow started through Temporal with
        no such row names no one, and is refused."""
        asker = None if request.start is None else StartTable(store).asker(request.start)
        if asker is not None and store.may_operate(asker):
            return
        who = f"role {asker}" if asker else "a start no fd_starts row names (Temporal alone)"
        raise NotPermittedError(
            f"worker {self.worker_id} refused the start of {request.key} in space "
            f"{request.space}: {who} is not granted operator in that space (an admin grants "
            'it: docs/remote.md, "Who can do what")'
        )

    async def _warm_again(self, base: dict[str, str]) -> None:
        """A warm process for the next start, once this one's run is under way."""
        await asyncio.sleep(WARM_AFTER)
        await asyncio.to_thread(self.warm.prepare, base)

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

    # -- attend -----------------------------------------------------------------------

    @activity.defn(name="attend")
    async def attend(self, request: AttendInput) -> dict[str, Any]:
        """A run this worker keeps, attended again after its ``run_flow`` was lost by
        the server (a Temporal outage): its outcome, or ``lost`` when it is not here
        (this is a new process with the same id)."""
        holding = self.runs.get(request.run)
        if holding is None:
            if request.run in self.finished:
                code = self.finished.pop(request.run)
                return {"run": request.run, "outcome": "ended", "exit": code}
            return {"run": request.run, "outcome": "lost"}
        return await self._attend(holding)

    # -- holder_gone ------------------------------------------------------------------

    @activity.defn(name="holder_gone")
    async def holder_gone(self, request: HolderInput) -> bool:
        """Whether the worker ``request.worker`` is gone: its lease in PostgreSQL was
        not renewed for ``LEASE_GONE`` seconds (by the server's clock)."""
        store = await asyncio.to_thread(self.access.open, request.space)
        try:
            age = await asyncio.to_thread(store.worker_age, request.worker)
        finally:
            await asyncio.to_thread(store.close)
        return age is None or age >= LEASE_GONE

    # -- deliver ----------------------------------------------------------------------

    @activity.defn(name="deliver")
    async def deliver(self, request: DeliverInput) -> dict[str, Any]:
        """A stop or pause for a run this worker holds, through today's verbs."""
        holding = self.runs.get(request.run)
        if holding is None or holding.child.poll() is not None:
            return {"ended": True}
        try:  # only a request an operator of the run's space made through PostgreSQL
            await asyncio.to_thread(controls.check, self.access, request, self.worker_id)
        except FlowdropError as exc:
            return _refusal(exc)
        return await asyncio.to_thread(_deliver, holding, request)

    # -- reap -------------------------------------------------------------------------

    @activity.defn(name="reap")
    async def reap(self, request: ReapInput) -> int:
        """Fence the key and clear the lost run's liveness: it shows ``interrupted``."""
        store = await asyncio.to_thread(self.access.open, request.space)
        try:
            return await asyncio.to_thread(store.reap, request.key, request.run, request.epoch)
        finally:
            await asyncio.to_thread(store.close)


def _deliver(holding: Holding, request: DeliverInput) -> dict[str, Any]:
    layout = Layout(holding.tree)
    by = {**request.by, "via": request.by.get("via", "cli")}
    try:
        if request.verb == "pause":
            asked = verbs.pause(layout, holding.run, by=by)
        else:
            # keep_paused: a run that paused meanwhile is closed by the client (its
            # record is then written through a holder of the key), never here.
            asked = verbs.stop(
                layout, holding.run, now=request.verb == "stop_now", by=by, keep_paused=True
            )
    except FlowdropError as exc:
        if isinstance(exc, AlreadyPausedError) and request.verb != "pause":
            return {"ended": True}
        return _refusal(exc)
    answer = {"run": asked.run, "key": asked.key, "action": str(asked.action)}
    return {"asked": {**answer, "round": asked.round}}


_VERBS = {RUN: "run", RESUME: "resume", CLOSE: "stop"}
_NEVER = ("--workspace", "--handshake-fd")  # the worker's own choices, never a client's


def check_request(request: FlowInput) -> None:
    """A command line a client sends: the mode's verb, nothing that moves the run out
    of its worktree or takes over the handshake."""
    verb = _VERBS.get(request.mode)
    args = request.args
    if (
        verb is None
        or not args
        or args[0] != verb
        or any(a.split("=")[0] in _NEVER for a in args)
        or any("\0" in a for a in args)
    ):
        raise UsageError(
            f"refused a request for key {request.key}: mode {request.mode!r} with command "
            f"line {args[:4]!r} is not one flowdrop-tui sends"
        )


def _checkout(source: MirrorWorktrees, request: FlowInput, name: str) -> tuple[Path, list[str]]:
    """The run's worktree and what to warn of. A resumed (or closed) run goes on where
    it left off, on the commits its worker pushed (as locally its workspace holds them);
    a new run, a pick-up too, starts on the client's HEAD (docs/remote.md). A worktree
    parked by an earlier run of the space is taken when there is one (warm)."""
    pool = _pool(request.space)
    if request.run is None:
        return source.checkout(request.commit, name, pool=pool), []
    tree, kept = source.checkout_run(request.run, request.commit, name, pool=pool)
    if kept:
        return tree, []
    return tree, [
        f"run {request.run} left no commits at {run_ref(request.run)} on the origin (its "
        f"worker was lost before it pushed any); it goes on from commit {request.commit[:12]}, "
        "the client's HEAD"
    ]


def _continuable(layout: Layout, request: FlowInput) -> set[str]:
    """The runs whose record the child may go on in: the one the request names (a
    resume, a close, or the paused run a ``run`` continues, as the client saw it), and
    for a ``run`` the one its start plan would continue (the replica is current)."""
    runs = {request.run} if request.run else set()
    if request.mode == RUN:
        with contextlib.suppress(FlowdropError, OSError):
            source = pick_up_source(layout, request.key)
            if source is not None:
                runs.add(source)
    return runs


def _size(run_dir: Path) -> int:
    """What a resumed run's output.log holds already (replicated from the store)."""
    try:
        return (run_dir / OUTPUT).stat().st_size
    except OSError:
        return 0


def _refusal(exc: FlowdropError) -> dict[str, Any]:
    return {**exc.as_json(), "exit": exc.exit_code}


def _pool(space: str) -> str:
    """The parked worktrees a run of ``space`` may take: its replica is the space's."""
    return hashlib.sha256(space.encode()).hexdigest()[:16]


def _tree_name(space: str, key: str, epoch: int) -> str:
    """A worktree folder per claim: keys hold '/', spaces anything; a digest names them."""
    digest = hashlib.sha256(f"{space}\0{key}".encode()).hexdigest()[:12]
    return f"{digest}-{epoch}"


def _close_paused(layout: Layout, args: list[str], env: dict[str, str]) -> dict[str, Any]:
    """``stop`` of a paused run, as its holder: the CLI's own ``stop`` in the worktree,
    writing through the mirror; its JSON answer and exit status."""
    import subprocess

    command = [sys.executable, "-m", "flowdrop_tui", "--workspace", str(layout.workspace), *args]
    done = subprocess.run(
        [*command, "--json"],
        cwd=layout.workspace,
        env=env,  # the whole environment (``StoreAccess.child_env``)
        capture_output=True,
        timeout=CLOSE_LIMIT,
        stdin=subprocess.DEVNULL,
    )
    try:
        answer = orjson.loads(done.stdout)
    except orjson.JSONDecodeError:
        tail = (done.stderr or done.stdout).decode(errors="replace").strip()[-1500:]
        message = f"closing the paused run failed on the worker: {tail}"
        return {"error": {"code": "ERROR", "message": message}, "exit": 1}
    if isinstance(answer, dict) and "error" in answer:
        return {**answer, "exit": done.returncode}
    return {"closed": answer, "exit": done.returncode}
