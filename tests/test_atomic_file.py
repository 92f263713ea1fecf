"""AtomicFile: every save whole and durable before it is published, and no reader —
however long it holds the file open — ever sees a file rewritten under it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import orjson
import pytest

from flowdrop_tui.core.files.atomic import AtomicFile
from tests.conftest import wait_for


def version(n: int) -> bytes:
    """Save number ``n``: its length varies, so a torn file cannot pass as whole."""
    return orjson.dumps({"n": n, "pad": "x" * (n * 37 % 900)})


def whole(raw: bytes) -> int:
    """The save number in ``raw``; fails the test on a torn or mixed file."""
    data = orjson.loads(raw)
    assert data["pad"] == "x" * (data["n"] * 37 % 900), raw[:80]
    return int(data["n"])


def saved(target: Path) -> int:
    """The save number ``target`` holds now, -1 before the first save."""
    return whole(target.read_bytes()) if target.exists() else -1


def child(code: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(code)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )


def test_each_save_is_published_whole(tmp_path: Path) -> None:
    """Guards against a save that is lost, stale, or leaves a partial file behind."""
    target = tmp_path / "state.json"
    file = AtomicFile(target)
    for n in range(40):
        file.replace(version(n))
        assert whole(target.read_bytes()) == n
    names = sorted(os.listdir(tmp_path))
    assert names[-1] == "state.json"
    assert all(name.startswith(".state.json.spare-") for name in names[:-1])


def test_steady_saves_reuse_three_inodes(tmp_path: Path) -> None:
    """Guards against the lean path silently falling back to a new file per save
    (what made a key set slower than SQLite)."""
    target = tmp_path / "state.json"
    file = AtomicFile(target)
    if not file.swapping:
        pytest.skip("this filesystem takes the plain path")
    inodes = []
    for n in range(12):
        file.replace(version(n))
        inodes.append(target.stat().st_ino)
    assert len(set(inodes[4:])) == 3


def test_a_reader_holding_the_file_never_sees_it_rewritten(tmp_path: Path) -> None:
    """Guards against rewriting in place an inode another process still reads."""
    target = tmp_path / "state.json"
    file = AtomicFile(target)
    for n in range(3):
        file.replace(version(n))
    reader = child(
        f"""
        import sys
        handle = open({str(target)!r}, "rb")
        print("open", flush=True)
        sys.stdin.readline()
        print(handle.read().decode(), flush=True)
        """
    )
    assert reader.stdout is not None and reader.stdin is not None
    assert reader.stdout.readline().strip() == "open"
    for n in range(3, 30):
        file.replace(version(n))
    reader.stdin.write("go\n")
    reader.stdin.flush()
    assert whole(reader.stdout.readline().encode()) == 2
    reader.wait(timeout=30)
    assert whole(target.read_bytes()) == 29


def test_concurrent_readers_only_ever_see_whole_saves(tmp_path: Path) -> None:
    """Guards against a torn read: readers that open, dawdle and read at any moment."""
    target = tmp_path / "state.json"
    file = AtomicFile(target)
    file.replace(version(0))
    readers = [
        child(
            f"""
            import random, sys, time, orjson
            bad = reads = 0
            last = -1
            while time.monotonic() < {time.monotonic()} + 60:
                with open({str(target)!r}, "rb") as handle:
                    if random.random() < 0.3:
                        time.sleep(random.random() / 1000)
                    raw = handle.read()
                try:
                    data = orjson.loads(raw)
                    n = data["n"]
                    ok = data["pad"] == "x" * (n * 37 % 900) and (n >= last or n == -1)
                except Exception:
                    n, ok = last, False
                bad += not ok
                reads += 1
                if n == -1:
                    break
                last = n
            print(reads, bad, flush=True)
            """
        )
        for _ in range(2)
    ]
    for n in range(1, 1500):
        file.replace(version(n))
    file.replace(version(-1))
    for reader in readers:
        out, _ = reader.communicate(timeout=120)
        reads, bad = map(int, out.split())
        assert reads > 0 and bad == 0, out


def test_a_hard_link_to_the_file_keeps_its_content(tmp_path: Path) -> None:
    """Guards against rewriting an inode that another name (a backup) still shows."""
    target = tmp_path / "state.json"
    file = AtomicFile(target)
    for n in range(5):
        file.replace(version(n))
    os.link(target, tmp_path / "backup.json")
    for n in range(5, 25):
        file.replace(version(n))
    assert whole((tmp_path / "backup.json").read_bytes()) == 4
    assert whole(target.read_bytes()) == 24


def test_a_reader_opening_the_spares_does_not_kill_the_writer(tmp_path: Path) -> None:
    """Guards against the lease-break signal (SIGIO by default, which kills) ending the
    run: a reader keeps opening the spares while a writer process saves."""
    target = tmp_path / "state.json"
    spares = [str(tmp_path / f".state.json.spare-{i}") for i in (0, 1)]
    reader = child(
        f"""
        import time
        print("ready", flush=True)
        while time.monotonic() < {time.monotonic()} + 60:
            for name in {spares!r}:
                try:
                    open(name, "rb").close()
                except OSError:
                    pass
        """
    )
    assert reader.stdout is not None
    reader.stdout.readline()
    code = f"""
        import orjson
        from flowdrop_tui.core.files.atomic import AtomicFile
        file = AtomicFile({str(target)!r})
        for n in range(800):
            file.replace(orjson.dumps({{"n": n, "pad": "x" * (n * 37 % 900)}}))
        """
    try:
        writer = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], timeout=120)
    finally:
        reader.kill()
        reader.wait()
    assert writer.returncode == 0
    assert whole(target.read_bytes()) == 799


def test_kill_9_mid_save_leaves_a_whole_file_and_the_next_writer_carries_on(
    tmp_path: Path,
) -> None:
    """Guards against a torn state.json after kill -9, and against a new writer
    (a resumed run) trusting spares the killed one left behind."""
    target = tmp_path / "state.json"
    writer_code = f"""
        import sys
        from flowdrop_tui.core.files.atomic import AtomicFile
        import orjson
        file = AtomicFile({str(target)!r})
        n = int(sys.argv[1])
        print("go", flush=True)
        while True:
            n += 1
            file.replace(orjson.dumps({{"n": n, "pad": "x" * (n * 37 % 900)}}))
        """
    start = 0
    for attempt in range(4):
        writer = subprocess.Popen(
            [sys.executable, "-c", textwrap.dedent(writer_code), str(start)],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert writer.stdout is not None
        assert writer.stdout.readline().strip() == "go"
        assert wait_for(lambda floor=start + 5: saved(target) > floor)
        time.sleep(0.01 * attempt)
        writer.send_signal(signal.SIGKILL)
        writer.wait()
        start = whole(target.read_bytes())
    assert start > 20
