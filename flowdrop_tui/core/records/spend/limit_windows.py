"""``.flowdrop/limits.json``: one closed usage-limit window per backend (SPEC §19).

A session limited by its account records the window here; every session of that
backend in the workspace — of this run or any other, now or after a ``kill -9``
and a pick-up — waits without calling while it is closed. The file is rewritten
whole (``write_atomic``) under ``limits.lock`` (``locks.exclusive``), so many runs
closing, probing and clearing windows at once leave it exact; never through a link
(a link planted at either name is refused, naming it).

A window has a known end (``until``: the reset time the CLI gave) or none; then it
is probed: ``next_probe`` is when one session may call again, after 1, 2, 4 … of
``probe_base`` (at most 30 of them) — and only one: the session that takes the
probe moves ``next_probe`` on before calling (``take_probe``), so a second run
waiting on the same window makes no call of its own. A session that succeeds clears
the window it found (``clear``), so the others go on at once.

In a run a worker started (remote mode) each run has a worktree of its own, so the
file is also the space's, shared through the mirror (``Mirror.shared``: a row in
PostgreSQL, held against every other worker): each operation first takes the
space's copy into this file, and gives back what it changed. So a limit one worker
meets closes the window for every worker's runs, and a run picked up on another
worker after its own was lost waits out the rest (SPEC §19, remote mode).
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson

from flowdrop_tui.core.files import locks
from flowdrop_tui.core.files.atomic import open_fd, write_atomic
from flowdrop_tui.core.files.regular import NotRegularFile, TooBig
from flowdrop_tui.core.paths import Layout, refuse_link
from flowdrop_tui.core.records import mirror
from flowdrop_tui.core.times import parse_time

VERSION = 1
LOCK_WAIT = 30.0  # the lock is held for a read and a rewrite of a small file
MAX_STEPS = 30  # at most 30 probe bases (30 minutes) between probes
# A reset is said in whole seconds (an epoch, or a clock time): a call made on the
# second itself may still be refused. Calls go this long after it.
MARGIN = timedelta(seconds=1)
# The file holds a few small windows: anything bigger is not one the engine wrote.
CAP = 64 * 1024
# No service's usage window lasts a year: a time further ahead than this (year 9999, a
# start with no end far away) is implausible. Such a window is held closed for exactly
# this long from when it is read, and marked so: a session meeting it pauses its run
# (``limit_reached``) instead of waiting, whatever its ``limit_wait``.
FAR_AHEAD = timedelta(days=366)
EARLIEST = datetime(2000, 1, 1, tzinfo=UTC)  # a time before it is no window's: not a time


def iso(when: datetime | None) -> str | None:
    if when is None:
        return None
    return when.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


@dataclass
class Window:
    """A backend's closed window."""

    backend: str
    since: datetime
    until: datetime | None  # the reset the CLI gave; None: probe
    next_probe: datetime | None  # when until is None: when a session may call again
    probes: int  # limited answers so far in this window (the probe interval doubles)
    source: str
    run: str | None = None
    implausible: bool = False  # a time in it was more than FAR_AHEAD ahead: clamped

    @property
    def opens(self) -> datetime:
        """When a session may call again."""
        if self.until is not None:
            return (
                self.until + MARGIN
                if self.until < datetime.max.replace(tzinfo=UTC) - MARGIN
                else self.until
            )
        return self.next_probe if self.next_probe is not None else self.since

    def closed(self, now: datetime) -> bool:
        return self.opens > now

    def to_json(self) -> dict[str, Any]:
        return {
            "since": iso(self.since),
            "until": iso(self.until),
            "next_probe": iso(self.next_probe),
            "probes": self.probes,
            "source": self.source,
            "run": self.run,
        }

    @classmethod
    def from_json(cls, backend: str, value: Any, now: datetime | None = None) -> Window | None:
        """A window as the file holds it; ``None`` when it has no start. A time before
        2000 (or not a time) is none; one more than ``FAR_AHEAD`` ahead of ``now`` is
        clamped to that, and the window marked implausible (see ``FAR_AHEAD``)."""
        if not isinstance(value, dict):
            return None
        now = now or datetime.now(UTC)
        latest = now + FAR_AHEAD
        clamped = False

        def time_of(name: str) -> datetime | None:
            nonlocal clamped
            when = parse_time(value.get(name))
            if when is None or when < EARLIEST:
                return None
            if when > latest:
                clamped = True
                return latest
            return when

        since = time_of("since")
        if since is None:
            return None
        probes = value.get("probes")
        run = value.get("run")
        return cls(
            backend=backend,
            since=since,
            until=time_of("until"),
            next_probe=time_of("next_probe"),
            probes=probes if isinstance(probes, int) and not isinstance(probes, bool) else 1,
            source=str(value.get("source") or "unknown")[:100],
            run=run if isinstance(run, str) else None,
            implausible=clamped,
        )


def plausible(when: datetime | None, now: datetime) -> tuple[datetime | None, bool]:
    """A reset as a CLI reported it, held to ``FAR_AHEAD`` (and whether it was)."""
    if when is None or when <= now + FAR_AHEAD:
        return when, False
    return now + FAR_AHEAD, True


def probe_step(probes: int, base: float) -> timedelta:
    """The wait before the next probe after ``probes`` limited answers: 1, 2, 4 … bases,
    at most 30 of them."""
    steps = min(2 ** max(0, min(probes - 1, 16)), MAX_STEPS)
    return timedelta(seconds=steps * base)


def _path(layout: Layout) -> str:
    return os.fspath(layout.limits)


def _read_bytes(layout: Layout) -> bytes | None:
    """The file's bytes, ``None`` when there is none. Read as every record file is
    (``files/regular.py``): never through a link (refused, naming it), never waiting
    (``O_NONBLOCK``: a FIFO planted there opens at once and is refused), only a regular
    file (a device is ``NotRegularFile``), at most ``CAP`` bytes (``TooBig``)."""
    path = layout.limits
    try:
        fd = open_fd(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            refuse_link(path)
        raise
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise NotRegularFile(path, mode)
        data = os.read(fd, CAP + 1)
        while data and len(data) <= CAP:
            more = os.read(fd, CAP + 1 - len(data))
            if not more:
                break
            data += more
        if len(data) > CAP:
            raise TooBig(path, len(data), CAP)
        return data
    finally:
        os.close(fd)


def read(layout: Layout, now: datetime | None = None) -> dict[str, Window]:
    """Every window the file holds (closed or not); none when there is no file or it
    is not JSON. ``OSError`` when it cannot be read: a link (``LinkRefusedError``), a
    FIFO or a device (``NotRegularFile``), a file far bigger than any it writes
    (``TooBig``) — whoever waits then warns and carries on (SPEC §19: nothing about
    waiting fails a run); the next window recorded replaces what is there."""
    data = _read_bytes(layout)
    if data is None:
        return {}
    try:
        found = orjson.loads(data)
    except orjson.JSONDecodeError:
        return {}
    windows = found.get("windows") if isinstance(found, dict) else None
    if not isinstance(windows, dict):
        return {}
    now = now or datetime.now(UTC)
    out = {}
    for backend, value in windows.items():
        window = Window.from_json(str(backend), value, now)
        if window is not None:
            out[str(backend)] = window
    return out


def _write(layout: Layout, windows: dict[str, Window]) -> None:
    refuse_link(layout.limits)
    body = {"version": VERSION, "windows": {b: w.to_json() for b, w in sorted(windows.items())}}
    write_atomic(_path(layout), orjson.dumps(body, option=orjson.OPT_INDENT_2) + b"\n")


def _locked(layout: Layout) -> Any:
    layout.ensure()
    return locks.exclusive(layout.limits_lock, wait=LOCK_WAIT)


SHARED_NAME = "limits.json"


def _local_bytes(layout: Layout) -> bytes | None:
    try:
        return _read_bytes(layout)
    except OSError:
        return None


@contextlib.contextmanager
def _space(layout: Layout) -> Iterator[None]:
    """Run one operation on the space's copy when a mirror shares it (remote mode's
    run child); locally the file itself is the workspace's, and this does nothing."""
    found = mirror.current()
    if found is None:
        yield
        return
    with found.shared(SHARED_NAME) as held:
        if held is None:
            yield
            return
        if held.data is not None and held.data != _local_bytes(layout):
            with _locked(layout):
                refuse_link(layout.limits)
                write_atomic(_path(layout), held.data)
        before = _local_bytes(layout)
        yield
        after = _local_bytes(layout)
        if after is not None and after != before:
            held.write(after)


def current(layout: Layout, backend: str, now: datetime | None = None) -> Window | None:
    """``backend``'s window when it is closed now."""
    now = now or datetime.now(UTC)
    with _space(layout):
        window = read(layout, now).get(backend)
    return window if window is not None and window.closed(now) else None


def close(
    layout: Layout,
    backend: str,
    *,
    until: datetime | None,
    source: str,
    run: str | None,
    probe_base: float,
    now: datetime | None = None,
) -> Window:
    """Record that ``backend`` refused a call: its window closes until ``until``, or, with
    no reset given, until the next probe (the interval doubling from the window's last)."""
    now = now or datetime.now(UTC)
    with _space(layout), _locked(layout):
        try:
            windows = read(layout, now)
        except (NotRegularFile, TooBig):
            windows = {}  # a FIFO, a device, a huge file planted there: replaced now
        before = windows.get(backend)
        # The same window, still being probed: the interval goes on doubling.
        ongoing = before is not None and before.until is None and before.since <= now
        probes = before.probes + 1 if ongoing and before is not None else 1
        since = before.since if ongoing and before is not None else now
        until, clamped = plausible(until, now)
        window = Window(
            backend=backend,
            since=since,
            until=until if until is not None and until > now else None,
            next_probe=None,
            probes=probes,
            source=source,
            run=run,
            implausible=clamped,
        )
        if window.until is None:
            if until is not None:  # a reset already past: probe soon, from the first step
                window.probes = probes = 1
            window.next_probe = now + probe_step(probes, probe_base)
        windows[backend] = window
        _write(layout, windows)
        return window


def take_probe(
    layout: Layout, backend: str, *, probe_base: float, now: datetime | None = None
) -> Window | None:
    """Before a call: ``None`` when it may go (no window, or its end has come), else the
    closed window to wait on. A probed window whose probe time has come is moved on by
    one step for the others first, so this session is the only one that calls."""
    with _space(layout):
        return _take_probe(layout, backend, probe_base=probe_base, now=now)


def _take_probe(
    layout: Layout, backend: str, *, probe_base: float, now: datetime | None
) -> Window | None:
    now = now or datetime.now(UTC)
    window = read(layout, now).get(backend)
    if window is None:
        return None
    if window.closed(now):
        return window
    if window.until is not None:
        return None  # the reset has come: everyone may call
    with _locked(layout):
        windows = read(layout, now)
        window = windows.get(backend)
        if window is None or window.until is not None:
            return None
        if window.closed(now):
            return window  # another session took this probe meanwhile
        window.next_probe = now + probe_step(window.probes + 1, probe_base)
        _write(layout, windows)
    return None


def clear(layout: Layout, backend: str, *, before: datetime) -> bool:
    """A session of ``backend`` that began at ``before`` succeeded: remove a window that
    was closed before it began (a later one is a new limit, kept). Whether one went."""
    with _space(layout):
        return _clear(layout, backend, before=before)


def _clear(layout: Layout, backend: str, *, before: datetime) -> bool:
    if backend not in read(layout):
        return False
    with _locked(layout):
        windows = read(layout)
        window = windows.get(backend)
        if window is None or window.since > before:
            return False
        del windows[backend]
        _write(layout, windows)
    return True
