"""Publishing state.json into files made ahead (core/files/spare_files.py; issue 28).

The rules that keep the speed-up safe: every publish is a new inode no reader has seen
and never written again (a reader holding the old file reads it whole), a name planted
where a spare goes is never written through, and what a killed process left of its
spares is removed — by the next save of the run and by the log's settling — never the
state itself. What injected I/O faults do to a flush or a rename is tested by
tests/test_io_faults.py (the real run under ``strace -e inject=``).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import orjson

from flowdrop_tui.core.files.spare_files import Beside
from flowdrop_tui.core.records import state_log
from flowdrop_tui.core.records.state import StateFile, read_run_states

RUN = "20261202T000000.000Z-abcdef"


def _run_dir(tmp_path: Path) -> Path:
    folder = tmp_path / RUN
    folder.mkdir()
    return folder


def _spares(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if ".next-" in p.name)


def test_a_reader_holding_the_old_file_reads_it_whole_after_later_saves(tmp_path: Path) -> None:
    folder = _run_dir(tmp_path)
    store = StateFile(folder / "state.json")
    s = store.state("k")
    s["n"] = 1
    held = os.open(folder / "state.json", os.O_RDONLY)
    try:
        last = os.fstat(held).st_ino
        for n in range(2, 40):
            s["n"] = n
            inode = os.stat(folder / "state.json").st_ino
            assert inode != last  # a new file at every publish (a freed one's number may recur)
            last = inode
            assert orjson.loads((folder / "state.json").read_bytes()) == {"k": {"n": n}}
        assert orjson.loads(os.pread(held, 1 << 16, 0)) == {"k": {"n": 1}}
        assert os.fstat(held).st_nlink == 0  # no longer named, never written again
    finally:
        os.close(held)
    assert len(_spares(folder)) <= 1  # the next file, made ahead
    store.close()
    assert _spares(folder) == []
    assert orjson.loads((folder / "state.json").read_bytes()) == {"k": {"n": 39}}


def test_a_state_that_outgrows_its_spare_is_published_all_the_same(tmp_path: Path) -> None:
    folder = _run_dir(tmp_path)
    store = StateFile(folder / "state.json")
    s = store.state("k")
    s["n"] = "x"
    for size in (5_000, 20_000, 3, 9_000):  # bigger than the spare made at the last save
        s["n"] = "x" * size
        assert orjson.loads((folder / "state.json").read_bytes()) == {"k": {"n": "x" * size}}
    store.close()
    assert _spares(folder) == []


def test_a_link_planted_where_a_spare_goes_is_never_written_through(tmp_path: Path) -> None:
    folder = _run_dir(tmp_path)
    outside = tmp_path / "outside"
    outside.write_bytes(b"keep")
    for n in range(1, 8):
        (folder / f"state.json.next-{n}").symlink_to(outside)
    (folder / "state.json.next-3").unlink()
    os.mkfifo(folder / "state.json.next-3")
    store = StateFile(folder / "state.json")
    s = store.state("k")
    for n in range(10):
        s["n"] = n
        assert orjson.loads((folder / "state.json").read_bytes()) == {"k": {"n": n}}
    assert outside.read_bytes() == b"keep"
    assert not (folder / "state.json").is_symlink()
    store.close()
    assert _spares(folder) == []


_KILLED = """
import sys, time
from pathlib import Path
from flowdrop_tui.core.records.state import StateFile
store = StateFile(Path(sys.argv[1]) / "state.json")
s = store.state("k")
for n in range(1, 21):
    s["n"] = n
print("saved", flush=True)
time.sleep(600)
"""


def test_spares_a_killed_process_left_are_removed_never_the_state(tmp_path: Path) -> None:
    folder = _run_dir(tmp_path)
    child = subprocess.Popen(
        [sys.executable, "-c", _KILLED, str(folder)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "saved"
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    left = _spares(folder)
    assert left  # the next file it had made ahead
    assert read_run_states(folder) == {"k": {"n": 20}}
    assert state_log.settle(folder) is True
    assert _spares(folder) == []
    assert orjson.loads((folder / "state.json").read_bytes()) == {"k": {"n": 20}}

    # and the run resumed by a new process: its first save removes what the last left
    for name in left:
        (folder / name).write_bytes(b"left by a kill")
    resumed = StateFile(folder / "state.json")
    resumed.adopt(read_run_states(folder))
    resumed.state("k")["n"] = 21
    assert all((folder / n).read_bytes() != b"left by a kill" for n in _spares(folder))
    resumed.close()
    assert _spares(folder) == []
    assert read_run_states(folder) == {"k": {"n": 21}}


def test_a_signal_that_raises_during_a_call_beside_leaves_no_wait_behind(tmp_path: Path) -> None:
    """Ctrl-C (a handler that raises) while a key set waits for what is done beside its
    flush: the exception goes on, but only once that is done — a wait left behind would
    let the next key set publish before its file was readied."""
    beside = Beside()
    ran: list[bytes] = []

    class Interrupted(Exception):
        pass

    def interrupt(signum: int, frame: object) -> None:
        raise Interrupted

    def slow(arg: bytes) -> None:
        time.sleep(0.05)  # the work beside the flush, long enough for the alarm to land
        ran.append(arg)

    old = signal.signal(signal.SIGALRM, interrupt)
    try:
        landed = 0
        for n in range(10):
            beside.start(slow, b"%d" % n)
            signal.setitimer(signal.ITIMER_REAL, 0.005)
            inside = False
            try:
                inside = True
                beside.wait()
                inside = False
            except Interrupted:
                if not inside:  # a loaded machine: it landed before the wait began
                    beside.wait()
                    continue
            else:
                continue  # the call was done before the alarm (a loaded machine)
            landed += 1
            assert ran[-1] == b"%d" % n  # waited out before the exception went on
            assert not beside._done.acquire(blocking=False)  # nothing left to wait for
            if landed == 3:
                break
        assert landed
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
        beside.close()
