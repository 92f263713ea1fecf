"""``flowdrop-tui worker``: the daemon a machine runs to take flow runs.

It polls two task queues: the shared one (workflows, with the reaping of a lost
run as their local activity, and ``run_flow`` up to ``max_runs`` at once; a local
activity takes no run slot, so a lost run is reaped even while every worker is
busy with runs), and its own (``flowdrop-worker-<id>``: stop and
pause for the runs it holds). SIGTERM or Ctrl-C stops taking runs, asks the runs
it holds to stop after their round, waits for them (up to ``DRAIN_LIMIT``), then
exits; a run still going then is killed, and its key reaped as a lost worker's.
Why: docs/decisions.md, "Runs on Temporal workers".
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import signal
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from temporalio.worker import Worker
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

from flowdrop_tui.core.control import verbs
from flowdrop_tui.core.errors import FlowdropError, UsageError
from flowdrop_tui.core.files import locks
from flowdrop_tui.core.paths import Layout
from flowdrop_tui.core.remote import replica
from flowdrop_tui.core.remote.daemon import worker_log, worktrees
from flowdrop_tui.core.remote.daemon.activities import WorkerActivities
from flowdrop_tui.core.remote.daemon.run_keeper import RunStore, StoreAccess
from flowdrop_tui.core.remote.daemon.write_through import (
    RunTicket,
    flow_env,
    password_shown,
    sweep_tickets,
)
from flowdrop_tui.core.remote.postgres import notify_settings
from flowdrop_tui.core.remote.postgres.store import PostgresStore
from flowdrop_tui.core.remote.remote_errors import StoreError, StoreUnreachableError
from flowdrop_tui.core.remote.start.start_forwarder import StartForwarder
from flowdrop_tui.core.remote.temporal_client import connect
from flowdrop_tui.core.remote.workflow import (
    HEARTBEAT_EVERY,
    LEASE_EVERY,
    LEASE_GONE,
    FlowKeyWorkflow,
)

_TEMPORAL_SETTING = "the worker's --temporal (or FLOWDROP_TEMPORAL)"
DRAIN_LIMIT = 60.0  # seconds a stopping worker waits for its runs to end after their round


@dataclass(frozen=True)
class WorkerSettings:
    temporal: str  # host:port of the Temporal frontend
    namespace: str
    task_queue: str
    worker_id: str
    home: Path
    max_runs: int
    access: StoreAccess
    spaces: tuple[str, ...] = ()  # worker --space: the spaces it serves (empty: any)
    origins: tuple[str, ...] = ()  # worker --origin, normalised: the origins it runs code of


class PostgresAccess:
    """The worker's way to the records: PostgreSQL at ``url`` (the worker's own
    setting; a space's rows are named by each run's request)."""

    def __init__(self, url: str, home: Path | None = None) -> None:
        self.url = url
        self.home = home  # the worker's own folder: its runs' notices are sent from it

    def open(self, space: str) -> RunStore:
        store = PostgresStore(self.url, space)
        try:
            store.ensure_schema()
        except BaseException:
            store.close()
            raise
        return store

    def sync(self, layout: Layout, store: RunStore) -> None:
        replica.sync(layout, store)
        notify_settings.place(layout, store, self.home)  # this worker sends the run's notices

    def child_env(
        self, space: str, key: str, epoch: int, worker: str, tickets: Path
    ) -> dict[str, str]:
        """A run child's whole environment: the worker's, less its own settings and
        secrets, and the variable naming the child's ticket file (in ``tickets``)."""
        ticket = RunTicket(self.url, space, key, epoch, worker)
        return {**flow_env(os.environ, self.url), **ticket.hand_over(tickets)}


def stamped(say: Callable[[str], None]) -> Callable[[str], None]:
    """A worker's own lines, each led by when it was said (UTC, to the second): a
    worker's log is read long after, next to the SDK's timestamped lines."""

    def told(line: str) -> None:
        say(f"{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())} {line}")

    return told


async def serve(
    settings: WorkerSettings,
    say: Callable[[str], None],
    ready: Callable[[dict[str, Any]], None] | None = None,
) -> int:
    """Poll until SIGTERM/SIGINT; then drain the runs held here and exit 0. ``ready``:
    told once it polls (``worker --json``'s line: its id, queues, runs at once, home)."""
    say = stamped(say)
    worker_log.install()  # the SDK's lines plain and timestamped, before its client
    settings.home.mkdir(parents=True, exist_ok=True)
    hold_home(settings.home, settings.worker_id)
    # Both servers answer before anything is polled (a worker that cannot write the
    # records would take runs only to fail them), and the id is this process's alone.
    client = await connect(settings.temporal, settings.namespace, setting=_TEMPORAL_SETTING)
    lease = await asyncio.to_thread(Lease.take, settings.access.url, settings.worker_id)
    left = worktrees.sweep(settings.home)
    sweep_tickets(settings.home)
    notify_settings.resume_senders(settings.home)  # retries its last run left waiting
    if left:
        say(f"worker {settings.worker_id}: removed {len(left)} worktrees a dead worker left")
    if password_shown(settings.access.url):
        say(
            f"worker {settings.worker_id}: warning: the PostgreSQL password is on this "
            "worker's command line, where `ps` shows it to every user of the machine; give "
            "the URL in FLOWDROP_POSTGRES instead (or the password in ~/.pgpass)"
        )
    acts = WorkerActivities(
        settings.worker_id,
        settings.home,
        settings.access,
        spaces=settings.spaces,
        origins=settings.origins,
    )
    await asyncio.to_thread(acts.warm_up)  # the first start's run process, loading now
    identity = f"{settings.worker_id}@{socket.gethostname()}"
    # The workflow module imports only temporalio and the standard library; passing
    # flowdrop_tui through keeps the sandbox from re-importing the package per run.
    runner = SandboxedWorkflowRunner(
        restrictions=SandboxRestrictions.default.with_passthrough_modules("flowdrop_tui")
    )
    shared = Worker(
        client,
        task_queue=settings.task_queue,
        workflows=[FlowKeyWorkflow],
        # reap, holder_gone: the workflows' local activities
        activities=[acts.run_flow, acts.reap, acts.holder_gone],
        max_concurrent_activities=settings.max_runs,
        workflow_runner=runner,
        identity=identity,
        graceful_shutdown_timeout=timedelta(seconds=5),
        # A heartbeat reaches the server at once, not throttled to 80% of the timeout
        # (the SDK's default): the timeout then counts from the last beat sent.
        max_heartbeat_throttle_interval=timedelta(seconds=HEARTBEAT_EVERY),
        default_heartbeat_throttle_interval=timedelta(seconds=HEARTBEAT_EVERY),
        # No sticky cache: a workflow's next task (its reaping) is never parked on the
        # dead worker's sticky queue for its schedule-to-start timeout first. The
        # histories are a dozen events; replaying one costs nothing.
        max_cached_workflows=0,
    )
    own = Worker(
        client,
        task_queue=acts.own_queue,
        activities=[acts.deliver, acts.attend],
        max_concurrent_activities=8,
        identity=identity,
    )
    stopping = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stopping.set)
    tasks = [asyncio.create_task(w.run()) for w in (shared, own)]
    renewing = asyncio.create_task(lease.renew(say))
    # Starts asked through PostgreSQL (clients never load the SDK): forwarded from here.
    forwarder = StartForwarder(
        client, settings.access.url, settings.namespace, settings.task_queue, lease.token, say
    )
    forwarding = asyncio.create_task(forwarder.serve())
    say(
        f"worker {settings.worker_id} polling {settings.task_queue} (up to "
        f"{settings.max_runs} runs) and {acts.own_queue}; home {settings.home}"
    )
    if ready is not None:
        ready(
            {
                "worker": settings.worker_id,
                "pid": os.getpid(),
                "task_queue": settings.task_queue,
                "own_queue": acts.own_queue,
                "max_runs": settings.max_runs,
                "home": str(settings.home),
                "namespace": settings.namespace,
            }
        )
    waiter = asyncio.create_task(stopping.wait())
    done, _ = await asyncio.wait([waiter, *tasks], return_when=asyncio.FIRST_COMPLETED)
    failed = [t for t in tasks if t in done and t.exception() is not None]
    forwarding.cancel()  # no more starts taken here; one under way goes to another worker
    if failed:  # a poller died (the server went away for good): say why, exit 1
        waiter.cancel()
        await acts.let_go(DRAIN_LIMIT)
        for w in (shared, own):
            with contextlib.suppress(Exception):
                await w.shutdown()
        raise FlowdropError(f"worker {settings.worker_id} stopped: {failed[0].exception()}")
    say(f"worker {settings.worker_id} stopping: asking its {len(acts.runs)} runs to stop")
    await asyncio.to_thread(_drain, acts)
    await acts.let_go(DRAIN_LIMIT)  # a run still going is killed; its liveness cleared
    renewing.cancel()
    await shared.shutdown()
    await own.shutdown()
    for task in tasks:
        with contextlib.suppress(Exception):
            await task
    return 0


class Lease:
    """This worker process's lease on its id in PostgreSQL (``fd_workers``), renewed
    every ``LEASE_EVERY`` s: the cluster reaps its runs only once it lapsed for
    ``LEASE_GONE`` s, and a second worker of the same id is refused while it is fresh."""

    def __init__(self, store: PostgresStore, worker_id: str) -> None:
        self.store, self.worker_id = store, worker_id
        self.token = f"{socket.gethostname()}/{os.getpid()}/{secrets.token_hex(4)}"

    @classmethod
    def take(cls, url: str, worker_id: str) -> Lease:
        """Check PostgreSQL answers and lets this worker in (exit 4 naming what to fix
        when not), then take the id's lease."""
        store = PostgresStore(url, "")
        try:
            store.ensure_schema()
            lease = cls(store, worker_id)
            lease.beat(take=lease._holder_dead())
        except (StoreUnreachableError, StoreError) as exc:
            store.close()
            raise StoreUnreachableError(
                f"worker {worker_id}: {_worker_words(exc.message)}"
            ) from None
        except BaseException:
            store.close()
            raise
        return lease

    def beat(self, *, take: bool = False) -> None:
        self.store.worker_beat(
            self.worker_id,
            self.token,
            socket.gethostname(),
            os.getpid(),
            fresh=LEASE_GONE,
            take=take,
        )

    def _holder_dead(self) -> bool:
        """The id's last holder was a process of this host that is gone (a worker
        restarted at once after a crash need not wait for its lease to lapse)."""
        rows = self.store.worker_holder(self.worker_id)
        if rows is None or rows[0] != socket.gethostname():
            return False
        try:
            os.kill(rows[1], 0)
        except ProcessLookupError:
            return True
        except OSError:
            return False
        return rows[1] == os.getpid()

    async def renew(self, say: Callable[[str], None]) -> None:
        """Renew the lease until cancelled; say once when PostgreSQL stops answering
        (the runs go on: their writes wait for it too) and once when it is back."""
        failing = False
        while True:
            try:
                await asyncio.to_thread(self.beat)
                if failing:
                    say(f"worker {self.worker_id}: PostgreSQL answers again")
                failing = False
            except FlowdropError as exc:
                if not failing:
                    say(f"worker {self.worker_id}: cannot renew its lease: {exc.message}")
                failing = True
            await asyncio.sleep(LEASE_EVERY)


def _worker_words(message: str) -> str:
    """A store error in a worker's words: its setting is --postgres, not the config's."""
    for said in (
        "FLOWDROP_POSTGRES (or [remote] postgres in .flowdrop/config.toml)",
        "FLOWDROP_POSTGRES (or [remote] postgres)",
    ):
        message = message.replace(said, "the worker's --postgres (or FLOWDROP_POSTGRES)")
    return message


def hold_home(home: Path, worker_id: str) -> None:
    """One worker per home, for its life: another would share (and sweep) its worktrees."""
    lock = home / "worker.lock"
    try:
        locks.acquire(lock, content=f"{worker_id} {os.getpid()}")
    except locks.LockHeld:
        holder = locks.holder_pid(lock)
        raise UsageError(
            f"another worker (pid {holder}) uses the home {home}; give each worker its own --home"
        ) from None


def _drain(acts: WorkerActivities) -> None:
    """Ask every run held here to stop after its round; wait for them to end."""
    for holding in list(acts.runs.values()):
        with contextlib.suppress(FlowdropError):
            verbs.stop(Layout(holding.tree), holding.run, by={"via": "worker shutdown"})
    deadline = time.monotonic() + DRAIN_LIMIT
    while acts.runs and time.monotonic() < deadline:
        time.sleep(0.2)
