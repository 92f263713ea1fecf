"""The network-namespace helper itself (tests/remote/netns.py; docs/decisions.md,
"Testing remote mode's failures").

A TCP server on the host's end of the veth pair is reachable from inside the
namespace, unreachable once the link is cut (a connection attempt times out, as
in a real partition), reachable again once healed; processes inside are gone
and the namespace and its pair deleted after ``close``, also when a test fails.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.remote import netns
from tests.remote.netns import Netns

CONNECT = """
import socket, sys
try:
    with socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=float(sys.argv[3])) as s:
        print(s.recv(16).decode())
except OSError as exc:
    print("unreachable:", type(exc).__name__)
"""


@pytest.fixture
def ns() -> Iterator[Netns]:
    netns.need()
    with Netns() as made:
        yield made


class Server:
    """A TCP server on ``host`` that answers every connection with ``hello``."""

    def __init__(self, host: str) -> None:
        self.sock = socket.create_server((host, 0))
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self.serve, daemon=True).start()

    def serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                conn.sendall(b"hello")


def connect_from(ns: Netns, host: str, port: int, timeout: float = 1.0) -> str:
    done = ns.run([sys.executable, "-c", CONNECT, host, str(port), str(timeout)], timeout=30)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_host_server_is_reachable_then_cut_off_then_reachable_again(ns: Netns) -> None:
    server = Server(ns.host_ip)
    try:
        assert connect_from(ns, ns.host_ip, server.port) == "hello"
        ns.cut()
        assert connect_from(ns, ns.host_ip, server.port) == "unreachable: TimeoutError"
        ns.heal()
        assert connect_from(ns, ns.host_ip, server.port) == "hello"
    finally:
        server.sock.close()


def test_inside_is_its_own_network_with_loopback_up(ns: Netns) -> None:
    """Loopback works inside; the host's loopback is not the namespace's."""
    done = ns.run(["ip", "-o", "addr"])
    assert f"inet {ns.ns_ip}/30" in done.stdout and "inet 127.0.0.1/8" in done.stdout
    assert "192.0.2." not in done.stdout and ns.host_ip not in done.stdout
    host_only = Server("127.0.0.1")
    try:
        assert connect_from(ns, "127.0.0.1", host_only.port).startswith("unreachable")
    finally:
        host_only.sock.close()


def test_two_namespaces_get_different_subnets_and_names() -> None:
    netns.need()
    with Netns() as a, Netns() as b:
        assert a.slot != b.slot and a.name != b.name
        assert {a.host_ip, a.ns_ip}.isdisjoint({b.host_ip, b.ns_ip})
        # Each reaches only its own host end: b's is another subnet, unrouted inside a.
        server = Server(b.host_ip)
        try:
            assert connect_from(b, b.host_ip, server.port) == "hello"
            assert connect_from(a, b.host_ip, server.port).startswith("unreachable")
        finally:
            server.sock.close()


def test_close_kills_processes_inside_and_removes_everything(ns: Netns) -> None:
    sleeper = ns.popen(["sleep", "600"])
    child_group = ns.popen(["sh", "-c", "sleep 600 & sleep 600 & wait"], start_new_session=True)
    # `ip netns exec` joins the namespace, then execs: the pid is the command's
    deadline = time.monotonic() + 10
    while not {sleeper.pid, child_group.pid} <= set(ns.pids()):
        assert time.monotonic() < deadline, "the command never showed up inside"
        time.sleep(0.01)
    ns.close()
    assert sleeper.wait(timeout=10) == -9 and child_group.wait(timeout=10) == -9
    assert ns.name not in netns._namespaces()
    assert subprocess.run(["ip", "link", "show", ns.host_if], capture_output=True).returncode != 0
    ns.close()  # idempotent


def test_leftovers_of_a_dead_owner_are_swept() -> None:
    """A test process killed before its cleanup leaves a namespace; the next allocation
    (in any process) removes it, processes inside included."""
    netns.need()
    script = (
        "import os, sys; sys.path.insert(0, sys.argv[1])\n"
        "from tests.remote.netns import Netns\n"
        "n = Netns(); n.popen(['sleep', '600'], stdout=-3, stderr=-3)\n"
        "print(n.name, n.host_if, flush=True); os._exit(0)\n"  # no cleanup: a crash
    )
    root = str(Path(__file__).resolve().parents[2])
    out = subprocess.run(
        [sys.executable, "-c", script, root], capture_output=True, text=True, timeout=60
    )
    name, host_if = out.stdout.split()
    leftover = next(n for n in netns._namespaces() if n == name)
    orphan = netns._ns_pids(leftover)
    assert orphan  # the sleep outlived its owner
    with Netns():
        assert name not in netns._namespaces()
        assert subprocess.run(["ip", "link", "show", host_if], capture_output=True).returncode != 0
    for pid in orphan:
        assert not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text()
