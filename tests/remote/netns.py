"""Network namespaces for the partition tests (docs/decisions.md, "Testing remote mode's
failures").

A :class:`Netns` is a Linux network namespace joined to the host by a veth pair:
the host side is ``10.213.A.B+1/30``, the namespace side ``+2``, a /30 of its own
per namespace (chosen under a file lock from the addresses not in use, so xdist
workers and parallel tests never collide). Loopback is up inside. Commands run
inside with ``ip netns exec``; :meth:`Netns.cut` takes the host side of the link
down (packets are dropped both ways, open TCP connections hang as in a real
partition — no RST, no FIN) and :meth:`Netns.heal` brings it back. ``iptables``
is not needed.

:meth:`Netns.close` always cleans up: every process inside is SIGKILLed, the
namespace and the veth pair are deleted. Leftovers of a session that died
(namespace names carry the owner's pid) are swept at the next allocation.

Needs root and ``ip`` (iproute2). :func:`unavailable` says why not; the fixture
skips with that reason, or fails when ``FLOWDROP_REQUIRE_NETNS=1`` (``.ci/run``
sets it: CI runs as root and must run the partition tests).
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

REQUIRE_ENV = "FLOWDROP_REQUIRE_NETNS"
PREFIX = "flowdrop"  # namespace names: flowdrop-<owner pid>-<slot>
NAME_RE = re.compile(rf"^{PREFIX}-(\d+)-(\d+)$")
SLOTS = 16384  # /30 subnets in 10.213.0.0/16
LOCK = Path(tempfile.gettempdir()) / "flowdrop-netns.lock"


class NetnsError(RuntimeError):
    """An ``ip`` command failed; the message names the command and what it said."""


def ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30)
    if check and done.returncode != 0:
        raise NetnsError(f"`ip {' '.join(args)}` failed ({done.returncode}): {done.stderr.strip()}")
    return done


@functools.cache
def unavailable() -> str | None:
    """Why network namespaces cannot be made here, or None when they can (probed once)."""
    if not sys.platform.startswith("linux"):
        return "network namespaces are Linux only"
    if os.geteuid() != 0:
        return "making a network namespace needs root (CI runs as root)"
    if shutil.which("ip") is None:
        return "the `ip` command is missing (Debian package iproute2; .ci/run installs it)"
    probe = f"{PREFIX}-{os.getpid()}-probe"
    made = ip("netns", "add", probe, check=False)
    if made.returncode != 0:
        return f"`ip netns add` is refused here: {made.stderr.strip()}"
    ip("netns", "del", probe, check=False)
    return None


def required() -> bool:
    return bool(os.environ.get(REQUIRE_ENV))


def need() -> None:
    """In a test: skip saying why namespaces cannot be made here, or fail instead where
    ``FLOWDROP_REQUIRE_NETNS=1`` (CI) says they must."""
    why = unavailable()
    if why is not None:
        if required():
            pytest.fail(f"network namespaces are required here ({REQUIRE_ENV}=1): {why}")
        pytest.skip(f"network namespaces: {why}")


def subnet(slot: int) -> tuple[str, str]:
    """The host and namespace addresses of ``slot``'s /30."""
    base = slot * 4
    a, b = divmod(base, 256)
    return f"10.213.{a}.{b + 1}", f"10.213.{a}.{b + 2}"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _namespaces() -> list[str]:
    out = ip("netns", "list", check=False).stdout
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def _ns_pids(name: str) -> list[int]:
    out = ip("netns", "pids", name, check=False).stdout
    return [int(tok) for tok in out.split() if tok.isdigit()]


def _kill_inside(name: str, timeout: float = 10.0) -> None:
    """SIGKILL every process in namespace ``name`` until none is left (they may fork)."""
    deadline = time.monotonic() + timeout
    while pids := _ns_pids(name):
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        if time.monotonic() > deadline:
            raise NetnsError(f"processes {pids} in namespace {name} outlived SIGKILL")
        time.sleep(0.02)


def _remove(name: str, slot: int) -> None:
    _kill_inside(name)
    ip("netns", "del", name, check=False)
    # Deleting the namespace destroys its end of the pair and so the host end;
    # a host end left from a half-made namespace is deleted by name.
    if ip("link", "show", f"fdh{slot}", check=False).returncode == 0:
        ip("link", "del", f"fdh{slot}", check=False)


def _sweep_dead_owners() -> None:
    for name in _namespaces():
        m = NAME_RE.match(name)
        if m and not _alive(int(m.group(1))):
            _remove(name, int(m.group(2)))


def _used_slots() -> set[int]:
    used = set()
    for found in re.finditer(r"inet 10\.213\.(\d+)\.(\d+)/", ip("-4", "-o", "addr").stdout):
        used.add((int(found.group(1)) * 256 + int(found.group(2))) // 4)
    for name in _namespaces():
        named = NAME_RE.match(name)
        if named:
            used.add(int(named.group(2)))
    return used


@contextlib.contextmanager
def _allocation_lock() -> Iterator[None]:
    with LOCK.open("a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


class Netns:
    """One namespace and its veth pair; use as a context manager or call :meth:`close`."""

    def __init__(self) -> None:
        why = unavailable()
        if why is not None:
            raise NetnsError(why)
        self.closed = False
        with _allocation_lock():
            _sweep_dead_owners()
            used = _used_slots()
            start = (os.getpid() * 7919) % SLOTS  # spread owners apart; the lock decides
            slot = next(
                (s % SLOTS for s in range(start, start + SLOTS) if s % SLOTS not in used), -1
            )
            if slot < 0:
                raise NetnsError("no free /30 left in 10.213.0.0/16")
            self.slot = slot
            self.name = f"{PREFIX}-{os.getpid()}-{slot}"
            self.host_if, self.ns_if = f"fdh{slot}", f"fdn{slot}"
            self.host_ip, self.ns_ip = subnet(slot)
            try:
                ip("netns", "add", self.name)
                ip("link", "add", self.host_if, "type", "veth", "peer", "name", self.ns_if)
                ip("link", "set", self.ns_if, "netns", self.name)
                ip("addr", "add", f"{self.host_ip}/30", "dev", self.host_if)
                ip("link", "set", self.host_if, "up")
                ip("-n", self.name, "addr", "add", f"{self.ns_ip}/30", "dev", self.ns_if)
                ip("-n", self.name, "link", "set", self.ns_if, "up")
                ip("-n", self.name, "link", "set", "lo", "up")
            except BaseException:
                _remove(self.name, slot)
                raise
        self.wait_carrier(True)

    def __enter__(self) -> Netns:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Netns({self.name}: host {self.host_ip} <-> ns {self.ns_ip})"

    # -- running inside -------------------------------------------------------

    def argv(self, argv: Sequence[str]) -> list[str]:
        """``argv`` wrapped to run inside (``ip netns exec`` execs it: same pid)."""
        return ["ip", "netns", "exec", self.name, *argv]

    def run(self, argv: Sequence[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        kwargs.setdefault("capture_output", True)
        kwargs.setdefault("text", True)
        kwargs.setdefault("timeout", 60)
        return subprocess.run(self.argv(argv), **kwargs)

    def popen(self, argv: Sequence[str], **kwargs: Any) -> subprocess.Popen[Any]:
        return subprocess.Popen(self.argv(argv), **kwargs)

    def pids(self) -> list[int]:
        """Every process running inside now."""
        return _ns_pids(self.name)

    # -- the link -------------------------------------------------------------

    def carrier(self) -> bool:
        """Whether the namespace side sees its link up (the host side is up)."""
        done = ip("-n", self.name, "-o", "link", "show", "dev", self.ns_if)
        return "LOWER_UP" in done.stdout and "NO-CARRIER" not in done.stdout

    def wait_carrier(self, up: bool, timeout: float = 10.0) -> None:
        deadline = time.monotonic() + timeout
        while self.carrier() != up:
            if time.monotonic() > deadline:
                raise NetnsError(f"{self.ns_if} in {self.name} never went {'up' if up else 'down'}")
            time.sleep(0.02)

    def cut(self) -> None:
        """Partition: the host end goes down; nothing passes either way until :meth:`heal`."""
        ip("link", "set", self.host_if, "down")
        self.wait_carrier(False)

    def heal(self) -> None:
        ip("link", "set", self.host_if, "up")
        self.wait_carrier(True)

    # -- cleaning up ----------------------------------------------------------

    def close(self) -> None:
        """Kill everything inside, delete the namespace and the pair. Idempotent."""
        if self.closed:
            return
        self.closed = True
        with _allocation_lock():
            _remove(self.name, self.slot)
