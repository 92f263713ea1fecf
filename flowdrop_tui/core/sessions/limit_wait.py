"""Waiting a usage limit out around a session (SPEC §19).

``run.session`` asks :class:`LimitWaits` before each call whether the backend's
window (``.flowdrop/limits.json``) is closed, and waits it out without calling;
after a limited session it records the window and, unless the flow asked for
``limit_wait=0``, waits and calls again — a new session with the same prompt and
options. The wait is the run's own interruptible wait (``SessionHost.hold``): a
stop ends the run at once, a pause pauses it at once. A wait longer than the
run's ``limit_wait`` pauses the run with ``limit_reached`` instead, so a
``resume`` goes on later (and waits again if the window is still closed).

Events: ``limit_wait`` (key, backend, until, next_probe, source, session, shared)
when a wait begins; ``limit_wait_ended`` (key, backend, outcome, seconds) when it
is over — ``open`` (the window opened: a call follows), ``stopped``, ``paused``,
``limit_reached``.
"""

from __future__ import annotations

import os
import time
from datetime import UTC, datetime, timedelta

from flowdrop_tui.core.errors import FlowdropError
from flowdrop_tui.core.records.spend import limit_windows
from flowdrop_tui.core.records.spend.limit_windows import Window, iso
from flowdrop_tui.core.sessions.host import SessionFrame, SessionHost
from flowdrop_tui.core.sessions.limit_signs import Limited

PROBE_ENV = "FLOWDROP_LIMIT_PROBE_SECONDS"  # the first probe's delay (default 60 s)
PROBE_BASE = 60.0
LOOK_EVERY = 1.0  # how often a waiting session looks at limits.json (a cleared window)


def probe_base() -> float:
    """Seconds before the first probe of a window with no known end (1, 2, 4 … of them)."""
    value = os.environ.get(PROBE_ENV)
    if not value:
        return PROBE_BASE
    try:
        base = float(value)
    except ValueError:
        raise FlowdropError(
            f"{PROBE_ENV} takes a number of seconds more than 0, not {value!r}"
        ) from None
    if not base > 0 or base != base or base == float("inf"):
        raise FlowdropError(f"{PROBE_ENV} takes a number of seconds more than 0, not {value!r}")
    return base


class LimitWaits:
    """The waits of one ``run.session(...)`` call."""

    def __init__(self, host: SessionHost, frame: SessionFrame, backend: str) -> None:
        self._host = host
        self._frame = frame
        self.backend = backend
        self.base = probe_base()
        self.began: float | None = None  # monotonic start of the wait in progress
        self.waited = 0.0
        self._warned: set[str] = set()

    @property
    def handing_over(self) -> bool:
        """``limit_wait=0``: a limited result goes to the flow at once, nothing waits."""
        return self._host.limit_wait <= 0

    # -- windows ---------------------------------------------------------------------------

    def record(self, limited: Limited, session: str) -> Window | None:
        """A session was limited: close the backend's window in ``limits.json``."""
        try:
            return limit_windows.close(
                self._host.layout,
                self.backend,
                until=limited.until,
                source=limited.source,
                run=self._host.run_id,
                probe_base=self.base,
            )
        except OSError as exc:  # the file cannot be written: this run still waits
            self._warn(f"the usage-limit window was not recorded ({exc.strerror or exc})")
            now = datetime.now(UTC)
            until, clamped = limit_windows.plausible(limited.until, now)
            ahead = until is not None and until > now
            return Window(
                self.backend,
                now,
                until if ahead else None,
                None if ahead else now + timedelta(seconds=self.base),
                1,
                limited.source,
                self._host.run_id,
                implausible=clamped,
            )

    def cleared(self, began: datetime) -> None:
        """A session that began at ``began`` succeeded: the window it found is open."""
        try:
            limit_windows.clear(self._host.layout, self.backend, before=began)
        except OSError as exc:
            self._warn(f"the usage-limit window was not cleared ({exc.strerror or exc})")

    def _closed(self) -> Window | None:
        try:
            return limit_windows.take_probe(self._host.layout, self.backend, probe_base=self.base)
        except OSError as exc:
            self._warn(f"the usage-limit windows could not be read ({exc.strerror or exc})")
            return None

    # -- the wait --------------------------------------------------------------------------

    def before_call(self, fallback: Window | None = None, session: str | None = None) -> None:
        """Wait while the backend's window is closed (``fallback``: this session's own,
        when ``limits.json`` could not hold it); return when a call may go."""
        if self.handing_over:
            return
        window = self._closed()
        if window is None and fallback is not None and fallback.closed(datetime.now(UTC)):
            window = fallback
        if window is None:
            return
        began = time.monotonic()
        shown = window
        self._log_wait(window, session)
        self._host.notify(f"waiting for {self.backend}'s usage limit {_until_words(window)}")
        cap = self._host.limit_wait
        try:
            while window is not None:
                now = datetime.now(UTC)
                waited = time.monotonic() - began
                left = (window.opens - now).total_seconds()
                # A wait known to outlast the cap pauses at once — a reset given, a probe
                # time, a start with neither (SPEC §19); so does an implausible window.
                if waited + left > cap or waited >= cap or window.implausible:
                    self._reached(window, began)
                step = max(0.0, min(left, LOOK_EVERY, cap - waited))
                asked = self._host.hold(step)
                if asked is not None:
                    self._ended(began, "stopped" if asked == "stop" else "paused")
                    self._host.leave_wait(asked)
                window = self._closed()
                if window is None and fallback is not None:
                    window = fallback if fallback.closed(datetime.now(UTC)) else None
                if window is not None and window.opens != shown.opens:
                    shown = window
                    self._log_wait(window, None)
        except KeyboardInterrupt:  # stop now (a second Ctrl-C) while waiting
            self._ended(began, "stopped")
            raise
        self._ended(began, "open")

    def _reached(self, window: Window, began: float) -> None:
        cap = self._host.limit_wait
        self._host.log.append(
            "limit_reached",
            key=self._frame.key,
            backend=self.backend,
            until=iso(window.until),
            next_probe=iso(window.next_probe),
            source=window.source,
            limit_wait=cap,
        )
        self._host.notify(
            f"{self.backend}'s usage limit lasts longer than this run waits "
            f"({_duration(cap)}): pausing; `flowdrop-tui resume` goes on "
            f"{_until_words(window)}"
        )
        self._ended(began, "limit_reached")
        self._host.leave_wait("pause")

    def _log_wait(self, window: Window, session: str | None) -> None:
        """``limit_wait``: a wait begins, or the window it waits on moved (a probe
        another run took); ``session``: the limited one, ``None`` for a window found."""
        self._host.log.append(
            "limit_wait",
            key=self._frame.key,
            backend=self.backend,
            until=iso(window.until),
            next_probe=iso(window.next_probe),
            source=window.source,
            session=session,
            shared=window.run != self._host.run_id,
        )

    def _ended(self, began: float, outcome: str) -> None:
        seconds = round(time.monotonic() - began, 3)
        self.waited += seconds
        self._host.log.append(
            "limit_wait_ended",
            key=self._frame.key,
            backend=self.backend,
            outcome=outcome,
            seconds=seconds,
        )

    def _warn(self, message: str) -> None:
        if message in self._warned:  # a wait looks every second: say it once
            return
        self._warned.add(message)
        self._host.log.append("warning", kind="limits", message=message)
        self._host.notify(f"warning: {message}")


def _until_words(window: Window) -> str:
    if window.until is not None:
        return f"until {_local(window.until)}"
    return f"(no reset time given; next try at {_local(window.opens)})"


def _local(when: datetime) -> str:
    return when.astimezone().strftime("%Y-%m-%d %H:%M:%S %Z").strip()


def _duration(seconds: float) -> str:
    if seconds >= 3600 and seconds % 3600 == 0:
        return f"{seconds / 3600:g} h"
    if seconds >= 60 and seconds % 60 == 0:
        return f"{seconds / 60:g} min"
    return f"{seconds:g} s"
