"""A start asked of the workers through PostgreSQL (``fd_starts``), so that a client
never loads Temporal's SDK to start a run (docs/decisions.md, "Remote mode: a start
asked through PostgreSQL").

The client inserts the request (what it would have started the key's workflow with)
and ``NOTIFY fd_starts``; a worker, listening, takes it to forward (``forwarding``),
starts the key's workflow with it (``start_forwarder``), and the answer — the run, or
the refusal met on the way — is written into the row and ``NOTIFY fd_start_answers,
'<id>'`` wakes the client. The row's state is the one place that decides:

- ``asked`` → ``forwarding``: a worker process forwards it; its lease token is the
  row's ``forwarder``. A forwarder whose lease lapsed (``LEASE_GONE``) is dead: another
  worker takes the row over and starts it again — the workflow it finds open is this
  request's (its memo says so) and is waited on, not started twice;
- ``forwarding`` → ``taken``: a ``run_flow`` took it, at most once (``take``): a second
  workflow of the same request (its first closed before it was taken over) makes no run;
- ``answered``: the answer is in the row, first writer wins (the run's ``run_flow`` or
  the forwarder);
- ``withdrawn``: the client gave up (Ctrl-C, ``START_LIMIT``) before a ``run_flow`` took
  it: nothing runs it, later or ever.

So a start is either run once or answered with a refusal, whoever dies when.
"""

from __future__ import annotations

import contextlib
import secrets
import signal
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import orjson
import psycopg

from flowdrop_tui.core.errors import FlowdropError
from flowdrop_tui.core.remote.postgres.login_words import unreachable
from flowdrop_tui.core.remote.postgres.store import PostgresStore
from flowdrop_tui.core.remote.remote_errors import StoreUnreachableError

RUN, RESUME, CLOSE = "run", "resume", "close"  # the modes of workflow.FlowInput
ASKED, FORWARDING, TAKEN, ANSWERED, WITHDRAWN = (
    "asked",
    "forwarding",
    "taken",
    "answered",
    "withdrawn",
)
ASK_CHANNEL = "fd_starts"  # payload: the task queue a start was asked on
ANSWER_CHANNEL = "fd_start_answers"  # payload: the request's id
START_LIMIT = 300.0  # seconds `run` waits for a worker to take the run and create it
WAIT_NOTICE = 3.0  # seconds after which a start no worker has taken is said to wait
LOOK_EVERY = 1.0  # seconds between looks at the row when no notification came


def new_id() -> str:
    return secrets.token_hex(12)


class StartTable:
    """``fd_starts`` over a ``PostgresStore``'s connection (one statement each)."""

    def __init__(self, store: PostgresStore) -> None:
        self.store = store

    def ask(self, request_id: str, request: dict[str, Any], namespace: str, queue: str) -> None:
        self.store.rows(
            "WITH asked AS (INSERT INTO fd_starts (id, space, key, namespace, task_queue, "
            "request) VALUES (%s, %s, %s, %s, %s, %s) RETURNING task_queue) "
            "SELECT pg_notify(%s, task_queue) FROM asked",
            (
                request_id,
                str(request["space"]),
                str(request["key"]),
                namespace,
                queue,
                orjson.dumps(request).decode(),
                ASK_CHANNEL,
            ),
        )

    def look(self, request_id: str) -> tuple[str, dict[str, Any] | None]:
        """The row's state and answer (``withdrawn`` when there is no such row)."""
        state, answer, _ = self.look_whole(request_id)
        return state, answer

    def look_whole(self, request_id: str) -> tuple[str, dict[str, Any] | None, str | None]:
        """The row's state, answer and taker."""
        rows = self.store.rows(
            "SELECT state, answer, taker FROM fd_starts WHERE id = %s", (request_id,)
        )
        if not rows:
            return WITHDRAWN, None, None
        state, answer, taker = rows[0]
        return (
            str(state),
            answer if isinstance(answer, dict) else None,
            None if taker is None else str(taker),
        )

    def asker(self, request_id: str) -> str | None:
        """The database role that asked for the start (``asked_by``: set by the
        database as the row was inserted, never by the client)."""
        rows = self.store.rows("SELECT asked_by FROM fd_starts WHERE id = %s", (request_id,))
        return None if not rows or rows[0][0] is None else str(rows[0][0])

    def withdraw(self, request_id: str) -> bool:
        """Withdraw a start no ``run_flow`` has taken; whether it was (else it is taken
        or answered: its run goes on, or it was refused)."""
        return bool(
            self.store.rows(
                "UPDATE fd_starts SET state = 'withdrawn', updated = now() WHERE id = %s "
                "AND state IN ('asked', 'forwarding') RETURNING id",
                (request_id,),
            )
        )

    def claim(self, namespace: str, queue: str, token: str, gone: float) -> list[tuple[str, Any]]:
        """Requests for this worker process (lease ``token``) to forward: those asked, and
        those whose forwarder's lease lapsed ``gone`` seconds ago (it died mid-start)."""
        rows = self.store.rows(
            "UPDATE fd_starts s SET forwarder = %s, updated = now(), state = CASE "
            "WHEN s.state = 'asked' THEN 'forwarding' ELSE s.state END "
            "WHERE s.id IN (SELECT t.id FROM fd_starts t WHERE t.namespace = %s "
            "AND t.task_queue = %s AND t.state IN ('asked', 'forwarding', 'taken') "
            "AND (t.state = 'asked' OR t.forwarder IS DISTINCT FROM %s AND NOT EXISTS ("
            "SELECT 1 FROM fd_workers w WHERE w.token = t.forwarder "
            "AND w.seen > now() - make_interval(secs => %s))) "
            "ORDER BY t.asked LIMIT 16 FOR UPDATE SKIP LOCKED) RETURNING s.id, s.request",
            (token, namespace, queue, token, gone),
        )
        return [(str(row[0]), row[1]) for row in rows]

    def take(self, request_id: str, taker: str) -> bool:
        """The ``run_flow`` of workflow run ``taker`` takes the request: true once per
        request (unless ``retake``), and again for the same taker (a retried call)."""
        return bool(
            self.store.rows(
                "UPDATE fd_starts SET state = 'taken', taker = %s, updated = now() "
                "WHERE id = %s AND (state IN ('asked', 'forwarding') "
                "OR state = 'taken' AND taker = %s) RETURNING id",
                (taker, request_id, taker),
            )
        )

    def retake(self, request_id: str) -> bool:
        """The run_flow that took it was lost before the run existed: it may be taken
        again (the start made again); false when it was withdrawn or answered meanwhile."""
        return bool(
            self.store.rows(
                "UPDATE fd_starts SET state = 'forwarding', taker = NULL, updated = now() "
                "WHERE id = %s AND state IN ('forwarding', 'taken') RETURNING id",
                (request_id,),
            )
        )

    def answer(self, request_id: str, answer: dict[str, Any]) -> None:
        """The answer, unless the row has one already (the first stands)."""
        self.store.rows(
            "WITH done AS (UPDATE fd_starts SET state = 'answered', answer = %s, "
            "updated = now() WHERE id = %s AND state <> 'answered' RETURNING id) "
            "SELECT pg_notify(%s, id) FROM done",
            (orjson.dumps(answer).decode(), request_id, ANSWER_CHANNEL),
        )

    def sweep(self, older: float) -> None:
        """Rows answered or withdrawn ``older`` seconds ago whose client never forgot
        them (it died, or lost PostgreSQL as it got the answer)."""
        self.store.rows(
            "DELETE FROM fd_starts WHERE state IN ('answered', 'withdrawn') "
            "AND updated < now() - make_interval(secs => %s)",
            (older,),
        )

    def forget(self, request_id: str) -> None:
        """The client has its answer: the row goes."""
        self.store.rows(
            "DELETE FROM fd_starts WHERE id = %s AND state IN ('answered', 'withdrawn')",
            (request_id,),
        )


class Interrupted(KeyboardInterrupt):
    """Ctrl-C (or SIGTERM, SIGHUP) while a start waited; its text says what became of
    the start, ``exit_code`` the status the CLI leaves with (128 + the signal)."""

    def __init__(self, words: str, exit_code: int = 128 + signal.SIGINT) -> None:
        super().__init__(words)
        self.exit_code = exit_code


ENDING_SIGNALS = (signal.SIGTERM, signal.SIGHUP)  # a CI's timeout, a closed ssh session


@contextlib.contextmanager
def withdrawn_on_signals() -> Iterator[list[int]]:
    """While a start waits: SIGTERM and SIGHUP end it as Ctrl-C does (the start is
    withdrawn unless a worker took it), where they would otherwise kill the process
    and leave it queued for a worker that comes later. Each is turned into a SIGINT to
    this process, so the wait (``asyncio.run``'s too) is interrupted the one way it
    knows; the list names the signals received. Only in the main thread, and only for
    a signal whose handler is the default one (a caller's own handler stays)."""
    received: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield received
        return

    def ended(signum: int, _frame: object) -> None:
        received.append(signum)
        signal.raise_signal(signal.SIGINT)

    replaced = {}
    for sig in ENDING_SIGNALS:
        if signal.getsignal(sig) is signal.SIG_DFL:
            replaced[sig] = signal.signal(sig, ended)
    try:
        yield received
    finally:
        for sig, before in replaced.items():
            signal.signal(sig, before)


def ask(
    store: PostgresStore,
    request: dict[str, Any],
    *,
    namespace: str,
    queue: str,
    say: Callable[[str], None] | None,
    waiting_words: Callable[[], str],
    limit: float = START_LIMIT,
    forward_here: Callable[[str, dict[str, Any], float], dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """Ask a worker to start ``request`` (``workflow.FlowInput``'s fields) and wait for
    the answer: ``{"run", "flow", "warnings", …}`` or ``{"error": …, "exit": …}``.

    ``say`` is told once, after ``WAIT_NOTICE``, when no run_flow has taken it yet
    (``waiting_words()``); Ctrl-C withdraws a start not taken yet (``Interrupted``, its
    text what became of it); past ``limit`` it is withdrawn and refused.

    ``forward_here(id, request, seconds left)``: when no worker has taken the request
    from PostgreSQL after ``WAIT_NOTICE`` (none runs, none reaches PostgreSQL, or none
    is of a version that reads the table), the client forwards it itself (through
    Temporal, as before the table) and that answer is the start's."""
    request_id = new_id()
    table = StartTable(store)
    listener = store.connect()
    deadline = time.monotonic() + limit
    try:
        with withdrawn_on_signals() as received:
            try:
                listener.execute(f"LISTEN {ANSWER_CHANNEL}")
                asked = {**request, "start": request_id}
                table.ask(request_id, asked, namespace, queue)
                if forward_here is None:
                    answer = _wait(table, listener, request_id, say, waiting_words, limit)
                else:
                    answer = _wait(
                        table, listener, request_id, None, waiting_words, limit, WAIT_NOTICE
                    )
                    if not answer:  # no worker took it from the table: forwarded from here
                        left = deadline - time.monotonic()
                        answer = forward_here(request_id, asked, left)
            except psycopg.Error as exc:
                raise unreachable(store.url, exc) from exc
            except KeyboardInterrupt:
                words = _withdrawn_words(table, request_id, str(request["key"]))
                signum = received[0] if received else signal.SIGINT
                raise Interrupted(words, 128 + signum) from None
    finally:
        listener.close()
    try:
        table.forget(request_id)
    except FlowdropError:
        pass  # a row left answered costs nothing; the next worker start sweeps it
    return answer


def _wait(
    table: StartTable,
    listener: psycopg.Connection[Any],
    request_id: str,
    say: Callable[[str], None] | None,
    waiting_words: Callable[[], str],
    limit: float,
    untaken_after: float | None = None,
) -> dict[str, Any]:
    """The answer; ``{}`` when no worker has taken the request ``untaken_after`` s on."""
    deadline = time.monotonic() + limit
    notice_at = time.monotonic() + WAIT_NOTICE
    untaken_at = float("inf") if untaken_after is None else time.monotonic() + untaken_after
    while True:
        state, answer = table.look(request_id)
        if state == ANSWERED and answer is not None:
            return answer
        if state == WITHDRAWN:
            raise FlowdropError(f"the start request {request_id} is gone from PostgreSQL")
        now = time.monotonic()
        if now >= untaken_at:
            if state == ASKED:
                return {}
            untaken_at = float("inf")  # a worker forwards it: its answer comes
        if now >= deadline:
            if table.withdraw(request_id):
                raise TimeoutError
            deadline = float("inf")  # taken meanwhile: its answer comes
        if say is not None and now >= notice_at:
            if state in (ASKED, FORWARDING):
                say(waiting_words())
            notice_at = float("inf")
        wake = min(deadline, notice_at, untaken_at, now + LOOK_EVERY) - now
        for _ in listener.notifies(timeout=max(wake, 0.0), stop_after=1):
            pass  # any answer wakes it: the row says whether it is this one's


def _withdrawn_words(table: StartTable, request_id: str, key: str) -> str:
    try:
        withdrawn = table.withdraw(request_id)
        state, answer = table.look(request_id)
    except StoreUnreachableError:
        return f"the start of {key} may have been taken: see it with flowdrop-tui runs {key}"
    if withdrawn or state == WITHDRAWN or (state == ANSWERED and answer and "error" in answer):
        return f"the start of {key} was withdrawn: nothing runs it"
    return (
        f"a worker had already taken {key}: its run goes on; see it with "
        f"flowdrop-tui runs {key}, stop it with flowdrop-tui stop RUN"
    )
