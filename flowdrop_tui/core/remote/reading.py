"""The read side in remote mode: bring this machine's replica up to date, then read it.

Every read verb (``flows``, ``runs``, ``show``, ``plan``, ``logs``, ``snapshot``,
``reindex``) reads the ordinary files under ``.flowdrop/``; in remote mode those
files are a replica of PostgreSQL (``replica.sync``), so the commands answer
exactly as locally once ``synced`` has run. ``show`` also fetches the commits
workers pushed to ``refs/flowdrop/runs/*`` (``fetch_run_refs``).

A server that cannot be reached is one clear error, never a hang: libpq's connect
is bounded (the store's ``connect_timeout``, 5 s) and the whole sync has a deadline
(``SYNC_TIMEOUT``) — a server that accepts the connection and then stops
answering (a partition) is reported too.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

from flowdrop_tui.core.errors import FlowdropError
from flowdrop_tui.core.git import RUN_REFS
from flowdrop_tui.core.paths import Layout, check_run_ref
from flowdrop_tui.core.remote.config import RemoteConfig
from flowdrop_tui.core.remote.remote_errors import RemoteUnreachableError, StoreUnreachableError

SYNC_TIMEOUT = 30.0  # seconds: a sync (connect included) not done by then is reported
FETCH_TIMEOUT = 60.0  # seconds: `git fetch` of the runs' refs

T = TypeVar("T")


def postgres_address(url: str) -> str:
    """``user@host:port/db`` of a PostgreSQL URL or conninfo string, never the password."""
    try:
        from psycopg.conninfo import conninfo_to_dict

        parts = conninfo_to_dict(url)
    except Exception:
        return "<unparsable URL>"
    host = parts.get("host") or parts.get("hostaddr") or "localhost"
    user = f"{parts['user']}@" if parts.get("user") else ""
    return f"{user}{host}:{parts.get('port') or '5432'}/{parts.get('dbname') or ''}"


def unreachable(config: RemoteConfig, reason: str) -> RemoteUnreachableError:
    return RemoteUnreachableError(
        f"cannot reach PostgreSQL at {postgres_address(config.postgres)}: {reason}; check "
        "that the server is running and FLOWDROP_POSTGRES (or [remote] postgres in "
        ".flowdrop/config.toml) points at it"
    )


def bounded(config: RemoteConfig, what: str, call: Callable[[], T], timeout: float) -> T:
    """``call()`` in a thread, given ``timeout`` seconds; a server that cannot be reached
    or stops answering becomes ``RemoteUnreachableError``. The thread of a call past its
    deadline is left to die with the process (a command exits right after)."""
    done: list[T] = []
    failed: list[BaseException] = []

    def target() -> None:
        try:
            done.append(call())
        except BaseException as exc:
            failed.append(exc)

    thread = threading.Thread(target=target, name=f"flowdrop-{what}", daemon=True)
    thread.start()
    thread.join(timeout)
    if thread.is_alive():
        raise unreachable(config, f"no answer to {what} within {timeout:g} s")
    if failed:
        exc = failed[0]
        if isinstance(exc, StoreUnreachableError) and not isinstance(exc, RemoteUnreachableError):
            raise RemoteUnreachableError(exc.message) from exc
        if getattr(exc, "sqlstate", None) == "42501":  # insufficient_privilege: a role's
            from flowdrop_tui.core.remote.remote_errors import NotPermittedError

            raise NotPermittedError(
                f"PostgreSQL refused {what}: {str(exc).strip().splitlines()[0]} (this role "
                'may not; see docs/remote.md, "Who can do what")'
            ) from exc
        if isinstance(exc, _psycopg_errors()):
            raise unreachable(config, str(exc).strip().splitlines()[0] or type(exc).__name__)
        raise exc
    return done[0]


def _psycopg_errors() -> tuple[type[Exception], ...]:
    import psycopg

    return (psycopg.OperationalError, psycopg.InterfaceError)


def sync_once(layout: Layout, config: RemoteConfig) -> None:
    """Open the store, bring the replica (records and pins) up to date, close."""
    import psycopg

    from flowdrop_tui.core.remote import replica, shared_pins
    from flowdrop_tui.core.remote.postgres.store import PostgresStore

    store = PostgresStore(config.postgres, config.space)
    try:
        try:
            replica.sync(layout, store)
        except psycopg.errors.UndefinedTable:
            store.ensure_schema()  # a database nothing has written to yet: no records
            replica.sync(layout, store)
        shared_pins.sync_pins(layout, config)
    finally:
        store.close()


def synced(
    layout: Layout, config: RemoteConfig, *, run_refs: bool = False, run: str | None = None
) -> list[str]:
    """Bring the replica up to date before a read; with ``run_refs``, also fetch the
    commits workers pushed (``run``: only that run's). Returns warnings (a fetch that
    failed does not fail ``show``: its commits are then listed as far as they are here)."""
    bounded(config, "the replica's sync", lambda: sync_once(layout, config), SYNC_TIMEOUT)
    if not run_refs:
        return []
    problem = fetch_run_refs(layout.workspace, config.origin, run)
    return [problem] if problem else []


def fetch_run_refs(workspace: Path, origin: str | None, run: str | None = None) -> str | None:
    """``git fetch <origin> 'refs/flowdrop/runs/*:refs/flowdrop/runs/*'``: the commits
    every worker pushed for its runs, so ``show`` lists them here — or only ``run``'s
    (``show RUN`` and ``diff RUN`` read no other run's ref, and a team's origin holds one
    per run). ``origin`` is the configured URL, else the workspace's ``origin`` remote.
    Returns why it failed, or None."""
    if run is not None and not check_run_ref(run):
        return None  # names no run: no ref to fetch (the read says so)
    source = origin or "origin"
    fetch = ["fetch", "--quiet", "--no-tags", "--no-write-fetch-head"]
    # One run's ref as a pattern (``<run>*``: run ids have one length, so it matches
    # that ref alone): a run that pushed no commit has none, and a pattern that matches
    # nothing is not an error where a ref that is not there would be.
    wanted = "*" if run is None else f"{run}*"
    fetch += ["--", source, f"+{RUN_REFS}/{wanted}:{RUN_REFS}/{wanted}"]
    try:
        done = _git(workspace, fetch)
    except subprocess.TimeoutExpired:
        return f"could not fetch the runs' commits from {source} within {FETCH_TIMEOUT:g} s"
    except OSError as exc:
        return f"could not run git to fetch the runs' commits: {exc.strerror or exc}"
    if done.returncode != 0:
        lines = [line for line in done.stderr.strip().splitlines() if line.strip()]
        why = lines[-1] if lines else f"git exited {done.returncode}"
        return f"could not fetch the runs' commits from {source}: {why}"
    return None


def drop_run_refs(workspace: Path, origin: str | None, run_ids: list[str]) -> str | None:
    """Delete pruned runs' ``refs/flowdrop/runs/<run>`` on the origin and here, so every
    ``show``'s fetch does not bring back refs of runs that are gone. Only refs the
    origin holds are deleted there (a run that never committed pushed none). Returns
    why it failed (the records are deleted all the same), or None."""
    if not run_ids:
        return None
    source = origin or "origin"
    wanted = {f"{RUN_REFS}/{run_id}" for run_id in run_ids}

    def git(*args: str) -> subprocess.CompletedProcess[str]:
        return _git(workspace, list(args))

    try:
        for ref in sorted(wanted):  # this clone's copies, fetched by `show`
            git("update-ref", "-d", ref)
        listed = git("ls-remote", "--refs", "--", source, f"{RUN_REFS}/*")
        if listed.returncode != 0:
            return f"could not list the runs' refs on {source}: {listed.stderr.strip()}"
        held = [line.split()[-1] for line in listed.stdout.splitlines() if line.strip()]
        gone = sorted(ref for ref in held if ref in wanted)
        if not gone:
            return None
        pushed = git("push", "--quiet", "--", source, *[f":{ref}" for ref in gone])
    except subprocess.TimeoutExpired:
        return f"could not delete the pruned runs' refs on {source} within {FETCH_TIMEOUT:g} s"
    except OSError as exc:
        return f"could not run git to delete the pruned runs' refs: {exc.strerror or exc}"
    if pushed.returncode != 0:
        return f"could not delete the pruned runs' refs on {source}: {pushed.stderr.strip()}"
    return None


def store_label(config: RemoteConfig) -> str:
    """The UI's top line in remote mode: which store the records come from."""
    address = postgres_address(config.postgres).split("@")[-1].split("/")[0]
    return f"remote: {config.space} @ {address}"


FOLLOW_GRACE = 20.0  # seconds without a new failure after which the follower is taken as back
FOLLOW_RETRY = 1.0  # seconds: the longest wait between two tries of a follower that failed


class LiveReplica:
    """The replica kept following PostgreSQL (``replica.Follower``: ``LISTEN/NOTIFY``
    and a sync on each change) while a view is open — the UI, ``logs -f``. Other
    machines' writes land in the replica's files, where the local readers see them.

    ``problem()`` says why following has been failing (the follower retries with
    backoff, at most ``FOLLOW_RETRY`` apart); ``failing_for()`` how long without a
    break, for a caller that must not wait for ever. A sync that succeeds ends the
    failure at once, whether it brought anything or not (the window of a later outage
    starts afresh)."""

    def __init__(self, layout: Layout, config: RemoteConfig) -> None:
        from flowdrop_tui.core.remote.replica import Follower

        self.config = config
        self._lock = threading.Lock()
        self._error: Exception | None = None
        self._first_failure = 0.0
        self._last_failure = 0.0
        self._follower = Follower(
            layout,
            config.postgres,
            config.space,
            on_ok=self._recovered,
            on_error=self._failed,
            interval=2.0,
            max_delay=FOLLOW_RETRY,
        )

    def start(self) -> None:
        self._follower.start()

    def stop(self) -> None:
        self._follower.stop()

    def _failed(self, exc: Exception) -> None:
        now = time.monotonic()
        with self._lock:
            if self._error is None or now - self._last_failure > FOLLOW_GRACE:
                self._first_failure = now
            self._error = exc
            self._last_failure = now

    def _recovered(self) -> None:
        with self._lock:
            self._error = None

    def failure(self) -> Exception | None:
        """Why following has been failing, or None (no failure for ``FOLLOW_GRACE``)."""
        with self._lock:
            if self._error is not None and time.monotonic() - self._last_failure > FOLLOW_GRACE:
                self._error = None  # no failure for a while: it is following again
            return self._error

    def problem(self) -> str | None:
        """``failure()`` in words (one line), for the UI."""
        exc = self.failure()
        if exc is None:
            return None
        text = getattr(exc, "message", None) or str(exc).strip() or type(exc).__name__
        return str(text).splitlines()[0]

    def failing_for(self) -> float:
        with self._lock:
            if self._error is None:
                return 0.0
            return time.monotonic() - self._first_failure


@contextlib.contextmanager
def following(layout: Layout, config: RemoteConfig) -> Iterator[Callable[[], None]]:
    """Keep the replica following while the block runs; yields ``check()``, which raises
    ``RemoteUnreachableError`` once following has failed for ``SYNC_TIMEOUT`` without a
    break (a run is then never shown as live for ever)."""
    live = LiveReplica(layout, config)
    live.start()

    def check() -> None:
        exc = live.failure()
        if exc is None or live.failing_for() <= SYNC_TIMEOUT:
            return
        if isinstance(exc, StoreUnreachableError):
            raise RemoteUnreachableError(exc.message) from exc
        if isinstance(exc, FlowdropError):
            raise exc  # the replica could not be written here (a full disk…): said as is
        raise unreachable(config, live.problem() or type(exc).__name__) from exc

    try:
        yield check
    finally:
        live.stop()


def _git(workspace: Path, args: list[str]) -> subprocess.CompletedProcess[str]:
    """git in ``workspace``, its output captured, never waiting for a password or
    longer than ``FETCH_TIMEOUT`` (``subprocess.TimeoutExpired``)."""
    return subprocess.run(
        ["git", *args],
        cwd=workspace,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=FETCH_TIMEOUT,
        env={**os.environ, "GIT_TERMINAL_PROMPT": "0"},  # never wait for a password
        check=False,
    )
