"""Remote mode behind the one seam (``core/mode.py``): runs on Temporal workers,
records in PostgreSQL, read here from a replica in the ordinary file layout.

Every verb keeps the local refusal codes (``TemporalExecutor`` answers a run that is
not live from the replica with today's verbs); every read is the local one over the
replica, brought up to date first (``reading.synced``: bounded; unreachable is exit 4).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import orjson

from flowdrop_tui.core import retention
from flowdrop_tui.core.control import verbs
from flowdrop_tui.core.flows.discovery import FlowRef
from flowdrop_tui.core.paths import Layout
from flowdrop_tui.core.records.run_record.liveness import remote_holder
from flowdrop_tui.core.remote import reading
from flowdrop_tui.core.remote.config import RemoteConfig
from flowdrop_tui.core.remote.start import grants
from flowdrop_tui.core.run.forecast import StartOptions

if TYPE_CHECKING:  # temporalio: imported when stop or pause first needs it
    from flowdrop_tui.core.remote.start.start_client import StartClient
    from flowdrop_tui.core.remote.temporal_executor import TemporalExecutor


class RemoteMode:
    """One workspace configured for remote mode, for the life of one process."""

    poll_every = 0.5

    def __init__(self, layout: Layout, settings: RemoteConfig) -> None:
        from flowdrop_tui.core.remote.postgres import spaces

        self.layout = layout
        # A space derived as it was before URLs were normalised, while only it holds
        # runs: used, and said with every read and start (core/remote/postgres/spaces.py).
        self.settings, note = spaces.settle(settings)
        self.notes = [note] if note else []
        # Made on first use: reads never load temporalio, starts neither (they are
        # asked through PostgreSQL: start_client), only stop and pause of a live run.
        self._executor: TemporalExecutor | None = None
        self._starts: StartClient | None = None

    @property
    def store_label(self) -> str:
        return reading.store_label(self.settings)

    @property
    def exit_without_teardown(self) -> bool:
        forwarded = self._starts is not None and self._starts.used_temporal
        return self._executor is not None or forwarded

    def _runs(self) -> TemporalExecutor:
        if self._executor is None:
            from flowdrop_tui.core.remote.temporal_executor import TemporalExecutor

            self._executor = TemporalExecutor(self.layout, self.settings)
        return self._executor

    def _start_client(self, say: Callable[[str], None] | None) -> StartClient:
        if self._starts is None:
            from flowdrop_tui.core.remote.start.start_client import StartClient

            self._starts = StartClient(self.layout, self.settings)
        self._starts.say = say
        return self._starts

    # -- the executor verbs -------------------------------------------------------------

    def start(
        self,
        ref: FlowRef,
        options: StartOptions,
        extra: list[str],
        *,
        say: Callable[[str], None] | None = None,
    ) -> dict[str, Any]:
        with grants.worded(self.settings, "run"):
            return self._noted(self._start_client(say).start(ref, options, extra))

    def started_elsewhere(self, start: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        return start()  # on a worker: a foreground run is followed from here

    def round_diff(self, run_id: str, number: int | None = None) -> dict[str, Any]:
        from flowdrop_tui.core.round_diff import round_diff

        # Runs ran in a worker's worktree: this working tree holds nothing they left.
        return round_diff(self.layout, run_id, number, worktree=False)

    def resume(
        self,
        run_id: str,
        extra: list[str],
        *,
        by: dict[str, Any] | None = None,
        say: Callable[[str], None] | None = None,
    ) -> dict[str, Any]:
        with grants.worded(self.settings, "resume"):
            return self._noted(self._start_client(say).resume(run_id, extra, by=by))

    def _noted(self, answer: dict[str, Any]) -> dict[str, Any]:
        if not self.notes:
            return answer
        return {**answer, "warnings": [*self.notes, *(answer.get("warnings") or [])]}

    def answer(
        self, run_id: str, answer: str, *, gate: str | None = None, by: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        """SPEC §21 in remote mode: checked here against the replica (self-answer, gate,
        choices), then carried to a worker as a resume that brings the answer (the run
        child records ``gate_answered`` and checks the gate again under the run's lock)."""
        from flowdrop_tui.core.control import gates

        self.sync()
        found = gates.check_answer(self.layout, run_id, answer, gate)
        given = orjson.dumps({"gate": found["gate"], "answer": answer}).decode()
        with grants.worded(self.settings, "answer"):
            started = self._start_client(None).resume(run_id, ["--answer", given], by=by)
        return {**started, "gate": found["gate"], "answer": answer}

    def stop(
        self,
        run_id: str,
        *,
        now: bool,
        by: dict[str, Any] | None = None,
        keep_paused: bool = False,
    ) -> verbs.Asked:
        with grants.worded(self.settings, "stop"):
            return self._runs().stop(run_id, now=now, by=by, keep_paused=keep_paused)

    def pause(self, run_id: str, *, by: dict[str, Any] | None = None) -> verbs.Asked:
        with grants.worded(self.settings, "pause"):
            return self._runs().pause(run_id, by=by)

    # -- reads --------------------------------------------------------------------------

    def sync(self, *, run_refs: bool = False, run: str | None = None) -> list[str]:
        return [
            *self.notes,
            *reading.synced(self.layout, self.settings, run_refs=run_refs, run=run),
        ]

    @contextlib.contextmanager
    def following_output(self, run_id: str) -> Iterator[Callable[[], bool]]:
        """The replica follows PostgreSQL (LISTEN/NOTIFY) while the lines are read from
        it: what a worker's run prints on another machine appears here as it is shipped."""
        run_dir = self.layout.run_dir(run_id)
        let_go: list[bool] = []
        with reading.following(self.layout, self.settings) as check:

            def held() -> bool:
                # The worker ships the run's last output after the run's end event, and
                # only then lets go of it (the replica's marker goes). Seen let go: one
                # more sync, so every line committed before that is here for the last read.
                check()
                if remote_holder(run_dir) is not None:
                    return True
                if not let_go:
                    let_go.append(True)
                    reading.synced(self.layout, self.settings)
                    return True
                return False

            yield held

    def pin(self, run_id: str) -> bool:
        return self._pin(run_id, pinned=True)

    def unpin(self, run_id: str) -> bool:
        return self._pin(run_id, pinned=False)

    def _pin(self, run_id: str, *, pinned: bool) -> bool:
        """The pin reaches every machine: a row in PostgreSQL (the caller syncs first:
        the run must be known here, as locally)."""
        from flowdrop_tui.core.remote import shared_pins

        change = shared_pins.pin if pinned else shared_pins.unpin
        with grants.worded(self.settings, "pin" if pinned else "unpin"):
            return reading.bounded(
                self.settings,
                "the pin",
                lambda: change(self.layout, self.settings, run_id),
                reading.SYNC_TIMEOUT,
            )

    def prune(
        self,
        keep: int,
        older_than: float | None = None,
        *,
        dry_run: bool = False,
        include_replaced: bool = False,
    ) -> retention.PruneResult:
        from flowdrop_tui.core.remote import pruning

        with grants.worded(self.settings, "prune"):
            return pruning.prune(
                self.layout,
                self.settings,
                keep,
                older_than,
                dry_run=dry_run,
                include_replaced=include_replaced,
            )

    def grant(
        self, role: str, dbrole: str, space: str | None, *, revoke: bool = False
    ) -> dict[str, Any]:
        return reading.bounded(
            self.settings,
            "the grant",
            lambda: grants.grant(self.settings, role, dbrole, space, revoke=revoke),
            reading.SYNC_TIMEOUT,
        )

    def inbox(self) -> list[dict[str, Any]]:
        from flowdrop_tui.core import inbox

        return inbox.items(self.layout, send=False)  # the worker holding a run sends

    def notice_problems(self) -> list[str]:
        return []  # workers send by the space's settings (remote config notify)

    def live_feed(self) -> reading.LiveReplica:
        return reading.LiveReplica(self.layout, self.settings)
