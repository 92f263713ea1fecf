"""Requests and signals reaching the run this process holds, and its stop-now watchdog.

Requests from other processes arrive as files (``requests.Inbox``); the run takes
them between rounds and a watcher thread takes them within ``WATCH_INTERVAL``,
recording each with who asked. SIGINT is escape: the first asks for a stop after
the round, the second (or one that follows ``stop --now``) interrupts the round.
SIGTERM and SIGHUP stop at once. After "stop now" the run gives itself
``STOP_NOW_GRACE`` seconds, then kills its own process group: this holds even
when whoever asked has gone.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from flowdrop_tui.core.control import process, requests
from flowdrop_tui.core.records import mirror
from flowdrop_tui.core.records.log.event_log import EventLog

STOP_NOW_GRACE = 10.0  # SPEC §10: killed if not ended this long after "stop now"
WATCH_INTERVAL = 0.2
_HANDLED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


@dataclass
class Flags:
    stop: bool = False
    stop_now: bool = False
    pause: bool = False
    finishing: bool = False  # saving and ending: signals no longer interrupt
    ended: bool = False


class RunSignals:
    """What other processes and signals have asked of one run, as flags it acts on."""

    def __init__(
        self,
        run_dir: Path,
        log: EventLog,
        notify: Callable[[str], None],
        current_round: Callable[[], int],
        children: set[int],
    ) -> None:
        self.flags = Flags()
        self.woken = threading.Event()  # set when a request is taken (a wait looks at once)
        self._inbox = requests.Inbox(run_dir)
        self._log = log
        self._notify = notify
        self._current_round = current_round
        self._children = children  # session processes, to pass an interrupt on to
        self._watchdog: threading.Timer | None = None
        self._watcher_stop = threading.Event()
        self._handlers: dict[int, Any] = {}
        self._printers: list[threading.Thread] = []
        # SIGINTs taken so far: a session that saw this change while it ran was
        # interrupted by the run, whatever its CLI made of the signal.
        self.interrupts = 0

    @property
    def stop_requested(self) -> bool:
        self.poll()
        return self.flags.stop or self.flags.stop_now

    def poll(self) -> None:
        """Take every pending request; record each with who asked."""
        for request in self._inbox.take():
            if request.kind == requests.PAUSE:
                if not self.flags.pause:
                    self.flags.pause = True
                    self._log.append("pause_requested", by=request.by)
                    self.woken.set()
            else:
                self.note_stop(request.kind == requests.STOP_NOW, request.by)

    def note_stop(self, now: bool, by: dict[str, Any]) -> None:
        self.woken.set()
        if now and not self.flags.stop_now:
            self.flags.stop_now = self.flags.stop = True
            self._log.append("stop_requested", by=by, now=True)
            self._arm_watchdog()
        elif not now and not self.flags.stop:
            self.flags.stop = True
            self._log.append("stop_requested", by=by, now=False)

    # -- the watchdog ---------------------------------------------------------------------
    def _arm_watchdog(self) -> None:
        if self._watchdog is None:
            self._watchdog = threading.Timer(STOP_NOW_GRACE, self._grace_expired)
            self._watchdog.daemon = True
            self._watchdog.start()

    def _grace_expired(self) -> None:
        if self.flags.ended:
            return
        self._log.append(
            "killing", reason=f"not ended {STOP_NOW_GRACE:g} s after stop now", signal="SIGKILL"
        )
        process.kill_own_group()

    def ended(self) -> None:
        self.flags.ended = True
        if self._watchdog is not None:
            self._watchdog.cancel()

    def discard_requests(self) -> None:
        """After ``ended``: what was asked and not taken is moot (docs/decisions.md,
        "Stopping and pausing")."""
        requests.discard_all(self._inbox.folder.parent)

    # -- signals and the watcher thread ------------------------------------------------------
    def install(self) -> None:
        if threading.current_thread() is threading.main_thread():
            for signum in _HANDLED:
                self._handlers[signum] = signal.signal(signum, self._on_signal)
        threading.Thread(target=self._watch, name="flowdrop-requests", daemon=True).start()

    def uninstall(self) -> None:
        self._watcher_stop.set()
        for printer in self._printers:  # a notice is never lost to the process ending
            printer.join(timeout=1.0)
        for signum, handler in self._handlers.items():
            signal.signal(signum, handler)
        self._handlers.clear()

    def _watch(self) -> None:
        while not self._watcher_stop.wait(WATCH_INTERVAL):
            try:
                self.poll()
            except Exception:  # a bad request file must not end the watcher
                pass

    def _on_signal(self, signum: int, _frame: Any) -> None:
        name = signal.Signals(signum).name
        if signum == signal.SIGINT:
            self.interrupts += 1
        if self.flags.finishing:
            return  # already saving and ending: let it finish
        self.poll()
        graceful = signum == signal.SIGINT and not (self.flags.stop or self.flags.stop_now)
        if graceful:
            self.note_stop(False, {"signal": name, "pid": None, "via": "Ctrl-C"})
            # Not printed from the handler itself: a print there can re-enter the
            # stream the flow was writing to (RuntimeError: reentrant call). A
            # thread of its own prints it at once, taking the stream's lock in turn.
            notice = (
                f"stopping after round {self._current_round()} — press Ctrl-C again to stop now"
            )
            printer = threading.Thread(target=self._notify, args=(notice,), daemon=True)
            self._printers.append(printer)
            printer.start()
            return
        self.note_stop(True, {"signal": name, "via": "Ctrl-C" if signum == signal.SIGINT else name})
        if os.getpgrp() != os.getpid():
            process.forward_interrupt(sorted(self._children))
        mirror.interrupt()  # a record write under way reaches the mirror first
