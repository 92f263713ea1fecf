"""write_atomic: every save whole and durable before it is published, and no reader —
however long it holds the file open — ever sees a file rewritten under it."""

from __future__ import annotations

import errno
import fcntl
import os
import shutil
import signal
import stat
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import orjson
import pytest

from flowdrop_tui.core.files.atomic import open_fd, remove_file, write_atomic
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
    for n in range(40):
        write_atomic(target, version(n))
        assert whole(target.read_bytes()) == n
    assert sorted(os.listdir(tmp_path)) == ["state.json"]


def test_a_reader_holding_the_file_never_sees_it_rewritten(tmp_path: Path) -> None:
    """Guards against rewriting in place an inode another process still reads."""
    target = tmp_path / "state.json"
    for n in range(3):
        write_atomic(target, version(n))
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
        write_atomic(target, version(n))
    reader.stdin.write("go\n")
    reader.stdin.flush()
    assert whole(reader.stdout.readline().encode()) == 2
    reader.wait(timeout=30)
    assert whole(target.read_bytes()) == 29


def test_concurrent_readers_only_ever_see_whole_saves(tmp_path: Path) -> None:
    """Guards against a torn read: readers that open, dawdle and read at any moment."""
    target = tmp_path / "state.json"
    write_atomic(target, version(0))
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
        write_atomic(target, version(n))
    write_atomic(target, version(-1))
    for reader in readers:
        out, _ = reader.communicate(timeout=120)
        reads, bad = map(int, out.split())
        assert reads > 0 and bad == 0, out


def test_a_hard_link_to_the_file_keeps_its_content(tmp_path: Path) -> None:
    """Guards against rewriting an inode that another name (a backup) still shows."""
    target = tmp_path / "state.json"
    for n in range(5):
        write_atomic(target, version(n))
    os.link(target, tmp_path / "backup.json")
    for n in range(5, 25):
        write_atomic(target, version(n))
    assert whole((tmp_path / "backup.json").read_bytes()) == 4
    assert whole(target.read_bytes()) == 24


def test_kill_9_mid_save_leaves_a_whole_file_and_the_next_writer_carries_on(
    tmp_path: Path,
) -> None:
    """Guards against a torn state.json after kill -9, and a new writer (a resumed run)
    stumbling on the temporary file the killed one left behind."""
    target = tmp_path / "state.json"
    writer_code = f"""
        import sys
        from flowdrop_tui.core.files.atomic import write_atomic
        import orjson
        target = {str(target)!r}
        n = int(sys.argv[1])
        print("go", flush=True)
        while True:
            n += 1
            write_atomic(target, orjson.dumps({{"n": n, "pad": "x" * (n * 37 % 900)}}))
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


def test_a_save_is_synced_then_renamed_then_its_folder_synced(tmp_path: Path) -> None:
    """Guards SPEC §5.1 against a power cut (docs/decisions.md, "Durability"): the bytes
    reach the disk before the rename publishes them, and the rename before the save returns."""
    strace = shutil.which("strace")
    if strace is None:
        pytest.skip("strace is not installed (.ci/run installs it)")
    target = tmp_path / "state.json"
    code = (
        "from flowdrop_tui.core.files.atomic import write_atomic\n"
        f"write_atomic({str(target)!r}, b'{{}}')\n"
        "print('returned', flush=True)\n"
    )
    done = subprocess.run(
        [
            strace,
            "-qq",
            "-y",
            "-e",
            "trace=fsync,fdatasync,rename,renameat,renameat2,write,pwrite64",
            "-o",
            str(tmp_path / "trace"),
            sys.executable,
            "-c",
            code,
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    calls = [
        line
        for line in (tmp_path / "trace").read_text().splitlines()
        if str(tmp_path) in line or "returned" in line
    ]
    kinds = [line.split("(")[0] for line in calls]
    assert kinds == ["pwrite64", "fdatasync", "rename", "fsync", "write"], calls
    assert f"<{target}.tmp>" in calls[0] and f"<{target}.tmp>" in calls[1]
    assert f"<{tmp_path}>" in calls[3]


def test_record_files_never_take_the_standard_descriptors(tmp_path: Path) -> None:
    """Guards docs/decisions.md, "Durability" (fd 0–2): with stdout closed, a new file would
    be fd 1, where a flow's own os.write(1, …) lands."""
    code = (
        "import os\n"
        "from flowdrop_tui.core.files.atomic import open_fd, write_atomic\n"
        "os.close(0); os.close(1)\n"
        f"fd = open_fd({str(tmp_path / 'x')!r}, os.O_WRONLY | os.O_CREAT)\n"
        f"write_atomic({str(tmp_path / 'y')!r}, b'{{}}')\n"
        "os.write(2, str(fd).encode())\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert int(done.stderr) >= 3
    fd = open_fd(tmp_path / "z", os.O_WRONLY | os.O_CREAT)
    try:
        assert fd >= 3
    finally:
        os.close(fd)


def test_a_full_disk_leaves_no_temporary_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Guards docs/decisions.md, "Durability" (full disk): a failed save holds no space and
    leaves the last save standing; the next one goes through once there is room."""
    target = tmp_path / "state.json"
    write_atomic(target, version(1))
    real = os.pwrite
    failures = [1]

    def full_once(fd: int, data: bytes, offset: int) -> int:
        if failures:
            failures.pop()
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(fd, data, offset)

    monkeypatch.setattr(os, "pwrite", full_once)
    with pytest.raises(OSError):
        write_atomic(target, version(2))  # it fails, cleanly
    assert whole(target.read_bytes()) == 1
    assert sorted(os.listdir(tmp_path)) == ["state.json"]
    write_atomic(target, version(3))
    assert whole(target.read_bytes()) == 3
    assert sorted(os.listdir(tmp_path)) == ["state.json"]


def test_a_sync_meant_to_reach_the_disk_asks_the_drive_where_it_can(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """macOS's fsync stops at the drive's cache: every sync of a key set — the state log's
    flush, a new log's file and folder, state.json made durable — asks ``F_FULLFSYNC``
    where the platform has it (here given to Linux, and the call recorded)."""
    from flowdrop_tui.core.records.flow_state.state import StateFile

    full = 51  # macOS's value; Linux has no such command
    asked: list[int] = []
    real = fcntl.fcntl

    def recorded(fd: int, command: int, *args: Any) -> Any:
        if command == full:
            asked.append(fd)
            return 0
        return real(fd, command, *args)

    synced: list[int] = []
    monkeypatch.setattr(fcntl, "F_FULLFSYNC", full, raising=False)
    monkeypatch.setattr(fcntl, "fcntl", recorded)
    for name in ("fsync", "fdatasync"):
        monkeypatch.setattr(os, name, lambda fd: synced.append(fd))
    folder = tmp_path / "20261202T000000.000Z-abcdef"
    folder.mkdir()
    store = StateFile(folder / "state.json")
    s = store.state("k")
    made = len(asked)
    assert made >= 2  # the new log's zeros, then its folder
    s["n"] = 1
    assert len(asked) == made + 1  # one flush per key set: the log's record
    store.close()  # state.json made durable: its bytes, its folder, the log removed
    assert len(asked) >= made + 4
    assert synced == []  # never the plain call where the drive can be asked
    monkeypatch.setattr(fcntl, "fcntl", real)
    monkeypatch.delattr(fcntl, "F_FULLFSYNC")
    write_atomic(tmp_path / "plain.json", b"{}")
    assert len(synced) == 2  # without it: fdatasync, then the folder's fsync


def test_remove_file_gives_its_blocks_back_with_its_name(tmp_path: Path) -> None:
    """A file removed durably holds no block any more once it returns (a power cut on
    ext2 then brings back no inode listing blocks given since to another file)."""
    target = tmp_path / "state.log"
    target.write_bytes(b"\0" * (256 << 10))
    held = os.open(target, os.O_RDONLY)
    try:
        remove_file(target)
        info = os.fstat(held)
        assert (info.st_size, info.st_blocks, info.st_nlink) == (0, 0, 0)
    finally:
        os.close(held)
    assert not target.exists()
    remove_file(target)  # gone: nothing to do


def test_remove_file_leaves_a_file_with_another_name_whole(tmp_path: Path) -> None:
    """An inode `e2fsck` gave back two names (a stale one, and another file's): only the
    name removed, the other file's content kept."""
    other = tmp_path / "cycle.jsonl"
    other.write_bytes(b"keep\n" * 1000)
    target = tmp_path / "state.log"
    os.link(other, target)
    remove_file(target)
    assert not target.exists() and other.read_bytes() == b"keep\n" * 1000


@pytest.mark.parametrize("planted", ["link", "fifo", "folder", "device"])
def test_remove_file_never_opens_or_empties_anything_planted(tmp_path: Path, planted: str) -> None:
    """A link (to a file outside), a FIFO or a device where the file was: never opened (a
    FIFO with no writer would hang an open), only the name removed, nothing outside
    emptied; a folder is refused as `os.unlink` refuses it, and left whole."""
    outside = tmp_path / "outside"
    outside.write_bytes(b"keep" * 1000)
    target = tmp_path / "state.log"
    if planted == "link":
        target.symlink_to(outside)
    elif planted == "fifo":
        os.mkfifo(target)
    elif planted == "folder":
        target.mkdir()
        (target / "inside").write_bytes(b"keep")
    else:
        try:
            os.mknod(target, stat.S_IFCHR | 0o600, os.makedev(1, 5))  # a /dev/zero
        except PermissionError:
            pytest.skip("making a device node needs root")
    if planted == "folder":
        with pytest.raises(OSError):
            remove_file(target)
        assert (target / "inside").read_bytes() == b"keep"
    else:
        remove_file(target)
        assert not os.path.lexists(target)
    assert outside.read_bytes() == b"keep" * 1000
