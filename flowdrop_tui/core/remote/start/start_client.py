"""Remote mode's ``run`` and ``resume`` (and the close of a paused run), asked of the
workers through PostgreSQL (``start_requests``): this process never loads Temporal's
SDK to start a run, so a start costs what a read does (psycopg) plus the worker's part.

What the request holds is what the key's workflow is started with
(``workflow.FlowInput``'s fields): the run child's command line, the commit and origin
a worker checks out, who asked, the client's branch, a snapshot file's text. Every
answer and refusal is a worker's, by its code (``errors.error_for``): the same
classes, exit statuses and one-line messages as when this process started the
workflow itself. Before asking, PostgreSQL must answer (exit 4: ``reading.synced``) and
the Temporal frontend must accept a connection (exit 4, ``TEMPORAL_UNREACHABLE``): a
start during an outage says so at once instead of waiting for a worker.
"""

from __future__ import annotations

import socket
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

from flowdrop_tui.core.errors import FlowdropError, UsageError, error_for
from flowdrop_tui.core.flows.discovery import FlowRef
from flowdrop_tui.core.paths import Layout, check_run_ref
from flowdrop_tui.core.records.listing import key_runs
from flowdrop_tui.core.records.log.event_log import who
from flowdrop_tui.core.records.run_record.run_fold import load_run
from flowdrop_tui.core.records.run_record.run_info import LIVE, Status
from flowdrop_tui.core.remote import reading
from flowdrop_tui.core.remote.config import RemoteConfig
from flowdrop_tui.core.remote.postgres.store import PostgresStore
from flowdrop_tui.core.remote.remote_errors import NotOnOriginError, TemporalUnreachableError
from flowdrop_tui.core.remote.start import start_requests
from flowdrop_tui.core.remote.start.start_requests import CLOSE, RESUME, RUN, START_LIMIT
from flowdrop_tui.core.run.forecast import StartOptions

CLIENT_SETTING = "`temporal` in .flowdrop/config.toml [remote] (or FLOWDROP_TEMPORAL)"
PROBE_LIMIT = 5.0  # seconds to wait for the Temporal frontend to accept a connection


class StartClient:
    """Starts, resumes and closes runs by asking a worker (one process's use)."""

    def __init__(self, layout: Layout, settings: RemoteConfig) -> None:
        self.layout = layout
        self.settings = settings
        # Told, once, that a start waits for a worker (the CLI: a line on stderr).
        self.say: Callable[[str], None] | None = None
        self._warnings: list[str] = []
        self.used_temporal = False  # a start this process forwarded itself (no worker took it)

    def start(self, ref: FlowRef, options: StartOptions, extra: list[str]) -> dict[str, Any]:
        reading.synced(self.layout, self.settings)
        args = ["run", ref.key]
        if options.from_run:
            args += ["--from", options.from_run]
        if options.resume:
            args += ["--resume", options.resume]
        if options.fresh:
            args.append("--fresh")
        snapshot = None if options.snapshot is None else _read_snapshot(options.snapshot)
        self._check_committed(ref)
        continues = None if snapshot is not None else self._paused_run(ref.key, options)
        request = self.request(RUN, ref.key, [*args, *extra], run=continues, snapshot=snapshot)
        return self.ask(request)

    def _check_committed(self, ref: FlowRef) -> None:
        """A worker runs the flow as the pushed commit has it: a flow file that is here
        but not in HEAD (new, never committed) is refused now, saying so, rather than
        by the worker as a file that "does not exist"."""
        head = _git(self.layout.workspace, "rev-parse", "HEAD")
        if head is None:
            return  # said by ``_head``: no commit at all
        try:
            rel = ref.file.resolve().relative_to(self.layout.workspace.resolve()).as_posix()
        except ValueError:
            return  # a flow outside the workspace: the worker says what it finds
        if _git(self.layout.workspace, "cat-file", "-e", f"{head}:{rel}") is not None:
            return
        folder = Path(rel).parent.as_posix()
        raise NotOnOriginError(
            f"flow {ref.name} is not committed: {rel} is in {self.layout.workspace} but not "
            f"in its HEAD ({head[:12]}), and a worker runs only what is pushed to the "
            f"origin; commit and push it (git add {folder} && git commit && git push), "
            "then run again"
        )

    def _paused_run(self, key: str, options: StartOptions) -> str | None:
        """The paused run of ``key`` this ``run`` continues in its own record (SG-12
        clause 3: ``--resume``, ``--from`` it, or a plain run while it is the thread's
        latest), as the replica shows it: the worker then checks out that run's own
        commits, as for ``resume``. The run child still decides (a flow that is not
        resumable starts fresh); the worker ships its output from the record's end."""
        from flowdrop_tui.core.run.start_plan import pick_up_source

        if options.fresh:
            return None
        candidate = options.resume or options.from_run
        if candidate is None:
            try:
                candidate = pick_up_source(self.layout, key)
            except (FlowdropError, OSError):
                return None
        if (
            not candidate
            or not check_run_ref(candidate)
            or not (self.layout.runs / candidate).is_dir()
        ):
            return None
        try:
            info = load_run(self.layout, candidate)
        except (FlowdropError, OSError):
            return None
        return candidate if info.status == Status.PAUSED and info.key == key else None

    def resume(
        self, run_id: str, extra: list[str], *, by: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        from flowdrop_tui.core.control import verbs

        reading.synced(self.layout, self.settings)
        info = verbs.check_resumable(self.layout, run_id)  # the local refusals, from the replica
        if info.key is None:
            raise FlowdropError(f"run {run_id}'s record names no flow key; it cannot be resumed")
        asker = orjson.dumps({**who(), "via": "cli", **(by or {})}).decode()
        args = ["resume", run_id, "--by", asker, *extra]
        return self.ask(self.request(RESUME, info.key, args, run=run_id))

    def close(self, run_id: str, key: str, by: dict[str, Any] | None) -> dict[str, Any]:
        """``stop`` of a paused run: a worker claims the key and closes it there."""
        return self.ask(self.request(CLOSE, key, ["stop", run_id], run=run_id, by=by))

    def request(
        self,
        mode: str,
        key: str,
        args: list[str],
        *,
        run: str | None,
        snapshot: str | None = None,
        by: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """``workflow.FlowInput``'s fields, and what this client knows that a worker
        cannot: the key's newest run, when the replica shows it stopped (``settled``: a
        workflow still open for it only cleans up, and a new start waits for it)."""
        commit, warnings = self._head(mode)
        self._warnings = warnings
        return {
            "space": self.settings.space,
            "key": key,
            "mode": mode,
            "args": args,
            "commit": commit,
            "origin": self._origin(),
            "by": {**who(), "via": "cli", **(by or {})},
            "run": run,
            "snapshot": snapshot,
            "branch": self._branch(),
            "settled": self._settled(key),
        }

    def ask(self, request: dict[str, Any]) -> dict[str, Any]:
        probe(self.settings.temporal)
        key = str(request["key"])
        store = PostgresStore(self.settings.postgres, self.settings.space)
        try:
            store.ensure_schema()
            answer = start_requests.ask(
                store,
                request,
                namespace=self.settings.namespace,
                queue=self.settings.task_queue,
                say=self.say,
                waiting_words=lambda: self._waiting_words(key),
                forward_here=self._forward_here,
            )
        except TimeoutError:
            raise FlowdropError(
                f"no worker took {key} within {START_LIMIT:.0f} s (task queue "
                f"{self.settings.task_queue}), and the start was withdrawn: nothing runs it "
                f"later; start a worker ({self._worker_hint()}), then run it again"
            ) from None
        finally:
            store.close()
        error = answer.get("error")
        if isinstance(error, dict):
            raise error_for(str(error.get("code")), str(error.get("message")))
        warnings = [*self._warnings, *(answer.get("warnings") or [])]
        return {**answer, "warnings": warnings}

    def _forward_here(
        self, request_id: str, request: dict[str, Any], left: float
    ) -> dict[str, Any]:
        """No worker took the request from PostgreSQL (none runs, none reaches it, or
        none reads the table yet): this process starts the key's workflow itself,
        through Temporal, as before the table — a worker that polls Temporal then
        answers, whatever its way to PostgreSQL (its refusal, exit 4, included); none
        polling: the waiting line, and Ctrl-C or the time limit withdraws it."""
        import asyncio

        from flowdrop_tui.core.remote.start.start_forwarder import StartForwarder  # temporalio
        from flowdrop_tui.core.remote.temporal_client import connect

        key = str(request["key"])
        table = start_requests.StartTable(PostgresStore(self.settings.postgres, ""))
        self.used_temporal = True

        async def forward() -> dict[str, Any]:
            try:
                client = await connect(self.settings.temporal, self.settings.namespace)
            except TemporalUnreachableError as exc:
                # Withdrawn, or a worker that comes later would run what was refused.
                if await asyncio.to_thread(table.withdraw, request_id):
                    raise
                raise TemporalUnreachableError(
                    f"{exc.message} (a worker took the start of {key} meanwhile: see it "
                    f"with flowdrop-tui runs {key})"
                ) from exc
            here = StartForwarder(
                client,
                self.settings.postgres,
                self.settings.namespace,
                self.settings.task_queue,
                f"client-{request_id}",
                lambda _: None,
            )
            if self.say is not None:
                say = self.say
                here.untaken = lambda: say(self._waiting_words(key))
                here.notice_after = 0.0  # WAIT_NOTICE s have passed already (on the table)
            try:
                return await asyncio.wait_for(here.forward_own(request_id, request), left)
            except (asyncio.CancelledError, TimeoutError):
                # Ctrl-C (asyncio.run cancels this), or the limit: withdrawn unless taken.
                if await asyncio.to_thread(table.withdraw, request_id):
                    await here.withdraw_own(self.settings.space, key)
                raise

        try:
            return asyncio.run(forward())
        finally:
            table.store.close()

    def _waiting_words(self, key: str) -> str:
        return (
            f"flowdrop-tui: waiting for a worker to take {key} on task queue "
            f"{self.settings.task_queue} (none has yet); start one with: "
            f"{self._worker_hint()} — Ctrl-C withdraws the start"
        )

    def _worker_hint(self) -> str:
        queue = self.settings.task_queue
        where = "" if queue == "flowdrop" else f" --task-queue {queue}"
        return f"flowdrop-tui worker --temporal {self.settings.temporal} --postgres URL{where}"

    def _settled(self, key: str) -> list[str]:
        newest = key_runs.newest(self.layout, key, limit=1)
        if newest and load_run(self.layout, newest[0]).status not in LIVE:
            return newest
        return []

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


def probe(address: str, *, setting: str = CLIENT_SETTING) -> None:
    """The Temporal frontend at ``address`` (host:port) accepts a TCP connection, or
    ``TemporalUnreachableError`` in the words the SDK's connect gave (exit 4)."""
    host, _, port = address.rpartition(":")
    host = host.strip("[]")
    try:
        with socket.create_connection((host, int(port)), timeout=PROBE_LIMIT):
            return
    except OSError as exc:
        why = _probe_failure(exc)
    raise TemporalUnreachableError(
        f"cannot reach the Temporal server at {address}: {why}; start the Temporal "
        f"server, or check {setting} points at it"
    )


def _probe_failure(exc: OSError) -> str:
    if isinstance(exc, socket.gaierror):
        return "the host name does not resolve"
    if isinstance(exc, TimeoutError):
        return "no answer (timed out)"
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused"
    return (exc.strerror or str(exc) or type(exc).__name__).lower()


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
