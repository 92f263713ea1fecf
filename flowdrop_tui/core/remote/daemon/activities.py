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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
from temporalio import activity

from flowdrop_tui.core.control import process, verbs
from flowdrop_tui.core.errors import AlreadyPausedError, FlowdropError, error_for
from flowdrop_tui.core.git import BRANCH_ENV, run_ref
from flowdrop_tui.core.lanes.place import CHECKED_OUT_ENV, branch_for
from flowdrop_tui.core.paths import OUTPUT, Layout, split_lane
from flowdrop_tui.core.remote.daemon.lane_push import PUSH_ENV, push_env
from flowdrop_tui.core.remote.daemon.run_keeper import (
    Holding,
    RunKeeper,
    RunStore,
    StoreAccess,
    _pool,
)
from flowdrop_tui.core.remote.daemon.start_checks import StartChecks, check_request
from flowdrop_tui.core.remote.daemon.warm import WarmChild
from flowdrop_tui.core.remote.daemon.worktrees import MirrorWorktrees
from flowdrop_tui.core.remote.daemon.write_through import (
    ENV_VAR,
    TICKETS,
    drop_ticket,
    flow_env,
)
from flowdrop_tui.core.remote.start import controls
from flowdrop_tui.core.remote.start.start_requests import StartTable
from flowdrop_tui.core.remote.workflow import (
    CLOSE,
    LEASE_GONE,
    RUN,
    WORKER_QUEUE_PREFIX,
    AttendInput,
    DeliverInput,
    FlowInput,
    HolderInput,
    ReapInput,
)
from flowdrop_tui.core.run.start_plan import pick_up_source

CLOSE_LIMIT = 120.0  # seconds a `stop` closing a paused run may take

WARM = "warm"  # the folder of the worker's home a warm run process waits in
WARM_AFTER = 1.0  # seconds after a start's answer before the next warm process starts


@dataclass
class WorkerActivities(RunKeeper, StartChecks):
    """The activities of one worker process (its id names its own task queue); the
    keeping of its runs is ``RunKeeper``'s, the checks before a start ``StartChecks``'."""

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
            checked, warnings, lane = await asyncio.to_thread(_checkout, source, request, name)
            tree = checked
            layout = Layout(tree)
            await asyncio.to_thread(self.access.sync, layout, store)
            env = self.access.child_env(
                request.space, request.key, epoch, self.worker_id, self.home / TICKETS
            )
            if request.branch:  # the run records the client's branch, not a detached HEAD
                env[BRANCH_ENV] = request.branch
            if lane is not None:  # its checkout is the lane's; its branch pushed each round
                env[CHECKED_OUT_ENV] = lane[0]
                env[PUSH_ENV] = push_env(request.origin, *lane)
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
            only_this = (ENV_VAR, BRANCH_ENV, CHECKED_OUT_ENV, PUSH_ENV)
            base = {k: v for k, v in env.items() if k not in only_this}
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

    async def _warm_again(self, base: dict[str, str]) -> None:
        """A warm process for the next start, once this one's run is under way."""
        await asyncio.sleep(WARM_AFTER)
        await asyncio.to_thread(self.warm.prepare, base)

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


def _checkout(
    source: MirrorWorktrees, request: FlowInput, name: str
) -> tuple[Path, list[str], tuple[str, str | None] | None]:
    """The run's worktree, what to warn of, and for a lane its branch and what the
    origin's branch was (the lease of its pushes). A resumed (or closed) run goes on
    where it left off, on the commits its worker pushed (as locally its workspace holds
    them); a new run, a pick-up too, starts on the client's HEAD (docs/remote.md); a
    lane's run, on its branch's tip on the origin when there is one (else a resumed
    run's own ref; a first run: the client's HEAD). A worktree parked by an earlier
    run of the space is taken when there is one (warm)."""
    pool = _pool(request.space)
    flow_key, lane_name = split_lane(request.key)
    if lane_name is not None:  # a resume too: the lane's branch holds its commits
        branch = branch_for(flow_key, lane_name)
        tree, seen, kept = source.checkout_lane(
            branch, request.commit, name, run_id=request.run, pool=pool
        )
        said = [] if kept or request.run is None else [_no_commits(request.run, request.commit)]
        return tree, said, (branch, seen)
    if request.run is None:
        return source.checkout(request.commit, name, pool=pool), [], None
    tree, kept = source.checkout_run(request.run, request.commit, name, pool=pool)
    if kept:
        return tree, [], None
    return tree, [_no_commits(request.run, request.commit)], None


def _no_commits(run: str, commit: str) -> str:
    return (
        f"run {run} left no commits at {run_ref(run)} on the origin (its worker was lost "
        f"before it pushed any); it goes on from commit {commit[:12]}, the client's HEAD"
    )


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
