"""Remote mode's stop and pause: carried to the worker holding the run (SPEC §18;
docs/decisions.md, "Runs on Temporal workers").

``stop`` and ``pause`` of a live run are the ``control`` Update of the key's workflow,
delivered on the holding worker through today's verbs; a run that is not live is
answered here from the replica with today's verbs (``PIPELINE_TERMINAL``,
``NO_ACTIVE_PAUSE``, …), and ``stop`` of a paused run closes it through a worker that
claims its key (asked as a start is: ``start_client``), so its record is written
through to PostgreSQL by a holder of the key. Starting and resuming never come here:
they are asked through PostgreSQL (``start_client``), without Temporal's SDK.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

from temporalio.client import Client, WorkflowUpdateFailedError
from temporalio.service import RPCError

from flowdrop_tui.core.control import verbs
from flowdrop_tui.core.errors import FlowdropError, error_for
from flowdrop_tui.core.paths import Layout, check_run_ref
from flowdrop_tui.core.records.log.event_log import who
from flowdrop_tui.core.records.run_record.run_fold import load_run
from flowdrop_tui.core.records.run_record.run_info import LIVE, RunInfo, Status
from flowdrop_tui.core.remote import reading
from flowdrop_tui.core.remote.config import RemoteConfig
from flowdrop_tui.core.remote.postgres.store import PostgresStore
from flowdrop_tui.core.remote.start import controls
from flowdrop_tui.core.remote.start.start_client import StartClient
from flowdrop_tui.core.remote.temporal_client import connect, within
from flowdrop_tui.core.remote.workflow import (
    DELIVER_LIMIT,
    HEARTBEAT_TIMEOUT,
    ControlRequest,
    FlowKeyWorkflow,
    workflow_id,
)

SETTLE_LIMIT = 10.0  # seconds a run its worker let go of may still read live here
# The control Update's whole wait: the workflow gives a holding worker that is gone
# DELIVER_LIMIT before it answers WORKER_UNREACHABLE; past this, Temporal is not
# answering (docs/remote.md, "When the Temporal server cannot be reached").
UPDATE_LIMIT = DELIVER_LIMIT.total_seconds() + 10.0


class TemporalExecutor:
    """Carries stop and pause to the worker holding the run."""

    remote = True

    def __init__(self, layout: Layout, settings: RemoteConfig) -> None:
        self.layout = layout
        self.settings = settings
        # Told, once, that a start waits for a worker (the CLI: a line on stderr).
        self.say: Callable[[str], None] | None = None

    # -- the replica --------------------------------------------------------------------

    def sync(self) -> None:
        """Bring this workspace's replica of the records up to PostgreSQL, as every read
        command does (``reading.synced``: bounded, the pins too; unreachable is exit 4)."""
        reading.synced(self.layout, self.settings)

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
        # Asked through PostgreSQL first: its grants refuse a viewer here, and the
        # holding worker acts only on this row (core/remote/start/controls.py).
        store = PostgresStore(self.settings.postgres, self.settings.space)
        try:  # one connection for the row, the run's liveness and the withdrawal
            control = controls.ask(store, run_id, verb)
            try:
                row = store.run_info(run_id)
                live = row is not None and bool(row.get("live"))
                answer = (
                    asyncio.run(self._control(str(row["key"]), verb, by, control))
                    if row and live
                    else {}
                )
            finally:
                controls.withdraw(store, control)  # taken already, or never to be
        finally:
            store.close()
        if answer:
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

    async def _control(
        self, key: str, verb: str, by: dict[str, Any] | None, control: str
    ) -> dict[str, Any]:
        client = await self._client()
        handle = client.get_workflow_handle(workflow_id(self.settings.space, key))
        try:
            answer: dict[str, Any] = await within(
                handle.execute_update(
                    FlowKeyWorkflow.control,
                    ControlRequest(verb, {**who(), "via": "cli", **(by or {})}, control),
                ),
                UPDATE_LIMIT,
                self.settings.temporal,
            )
        except (RPCError, WorkflowUpdateFailedError):
            return {"ended": True}  # no open workflow for the key: the run is not held
        return answer

    def _close(self, run_id: str, key: str | None, by: dict[str, Any] | None) -> verbs.Asked:
        """``stop`` of a paused run: a worker claims the key and closes it there."""
        if key is None:
            raise FlowdropError(f"run {run_id}'s record names no flow key; it cannot be closed")
        starts = StartClient(self.layout, self.settings)
        starts.say = self.say
        answer = starts.close(run_id, key, by)
        closed = answer.get("closed")
        if not isinstance(closed, dict):
            raise FlowdropError(f"closing run {run_id} gave no answer")
        self.sync()
        return _asked({**closed, "key": key, "action": closed.get("action")})

    # -- helpers ------------------------------------------------------------------------

    async def _client(self) -> Client:
        return await connect(self.settings.temporal, self.settings.namespace)


def _asked(data: dict[str, Any]) -> verbs.Asked:
    return verbs.Asked(
        run=str(data.get("run")),
        key=None if data.get("key") is None else str(data.get("key")),
        action=verbs.Action(str(data.get("action"))),
        round=int(data.get("round") or 0),
    )
