"""The run's state log (records/flow_state/state_log.py; issue 28): a key set durable at one flush.

What a power cut can leave is tested by bench/powercut.py (tests/harnesses/test_powercut.py); here,
the rules that make it hold: the newest whole record wins, a torn or foreign one never
does, a wrap makes state.json durable first, every reader reads the log first, the run's
end leaves state.json whole and no log, and a log a kill left is settled by the next run.
"""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from flowdrop_tui.core.errors import UnusableStateError
from flowdrop_tui.core.files import locks
from flowdrop_tui.core.records.flow_state import state_log
from flowdrop_tui.core.records.flow_state.state import StateFile, read_run_states
from tests.conftest import wait_for

RUN = "20261202T000000.000Z-abcdef"


_HELD: list[Path] = []


@pytest.fixture(autouse=True)
def _let_go() -> Iterator[None]:
    yield
    while _HELD:
        locks.release(_HELD.pop())


def _run_dir(tmp_path: Path) -> Path:
    """A run's folder held as its process holds it (``live.lock``): a live run's log is
    read, never settled."""
    folder = tmp_path / RUN
    folder.mkdir()
    locks.acquire(folder / "live.lock")
    _HELD.append(folder / "live.lock")
    return folder


def _killed(folder: Path) -> None:
    """The run's process is gone (its lock let go), its log left as it was."""
    locks.release(folder / "live.lock")
    _HELD.remove(folder / "live.lock")


def _log(folder: Path) -> bytes:
    return (folder / "state.log").read_bytes()


def test_each_key_set_is_one_record_and_the_newest_is_the_state(tmp_path: Path) -> None:
    folder = _run_dir(tmp_path)
    store = StateFile(folder / "state.json")
    s = store.state("k")
    for n in range(1, 6):
        s["n"] = n
    assert read_run_states(folder) == {"k": {"n": 5}}
    found = state_log.newest(folder)
    assert found is not None and orjson.loads(found.payload) == {"k": {"n": 5}}
    assert len(_log(folder)) == state_log.LOG_MIN  # pre-allocated: the size never changes
    store.close()
    assert not (folder / "state.log").exists()
    assert orjson.loads((folder / "state.json").read_bytes()) == {"k": {"n": 5}}


def test_state_json_holds_every_key_set_when_it_returns(tmp_path: Path) -> None:
    """The seed: setting a key writes the file again — back to back too, nothing later."""
    folder = _run_dir(tmp_path)
    store = StateFile(folder / "state.json")
    s = store.state("k")
    for n in range(50):
        s["n"] = n
        s["m"] = -n  # the second of two sets in a row: written before it returns
        assert orjson.loads((folder / "state.json").read_bytes()) == {"k": {"n": n, "m": -n}}
    assert not any(p.name.endswith(".tmp") for p in folder.iterdir())
    store.close()


def test_a_torn_last_record_leaves_the_one_before(tmp_path: Path) -> None:
    """A power cut mid-write: the torn record fails its checksum; the last whole one wins."""
    folder = _run_dir(tmp_path)
    store = StateFile(folder / "state.json")
    s = store.state("k")
    s["n"] = 1
    s["n"] = 2
    found = state_log.newest(folder)
    assert found is not None
    raw = bytearray(_log(folder))
    raw[found.end - 1] ^= 0xFF  # the last byte of the newest record
    (folder / "state.log").write_bytes(bytes(raw))
    assert read_run_states(folder) == {"k": {"n": 1}}


def test_records_of_another_run_or_junk_are_never_taken(tmp_path: Path) -> None:
    """The checksum is seeded with the run's id: a log copied from another run holds
    nothing for this one, and one that is not a log at all is read as holding nothing."""
    other = _run_dir(tmp_path)
    store = StateFile(other / "state.json")
    store.state("k")["n"] = 7
    mine = tmp_path / "20261202T000000.000Z-123456"
    mine.mkdir()
    (mine / "state.json").write_bytes(b'{"k":{"n":1}}')
    (mine / "state.log").write_bytes(_log(other))
    assert read_run_states(mine) == {"k": {"n": 1}}
    (mine / "state.log").write_bytes(os.urandom(state_log.LOG_MIN))
    assert read_run_states(mine) == {"k": {"n": 1}}


def test_a_wrap_makes_state_json_durable_before_it_writes_over_the_log(tmp_path: Path) -> None:
    """Past the end the log starts again at 0 with higher numbers; the lap's records are
    overwritten only after state.json holds the state, so a torn first record of the new
    lap leaves state.json (current), never an older record."""
    folder = _run_dir(tmp_path)
    store = StateFile(folder / "state.json")
    s = store.state("k", {"pad": "x" * 900})
    per_lap = state_log.LOG_MIN // 950
    for n in range(per_lap + 3):
        s["n"] = n
    found = state_log.newest(folder)
    assert found is not None and found.end < state_log.LOG_MIN // 4  # wrapped to the start
    assert read_run_states(folder)["k"]["n"] == per_lap + 2
    raw = bytearray(_log(folder))
    raw[30] ^= 0xFF  # tear the new lap's first record: nothing of the log is whole now
    (folder / "state.log").write_bytes(bytes(raw))
    assert state_log.newest(folder) is None
    assert read_run_states(folder)["k"]["n"] >= per_lap - 1  # what the wrap made durable


def test_a_state_too_big_for_the_log_is_written_durably_and_the_log_removed(
    tmp_path: Path,
) -> None:
    folder = _run_dir(tmp_path)
    store = StateFile(folder / "state.json")
    s = store.state("k")
    s["n"] = 1
    assert (folder / "state.log").exists()
    s["big"] = "y" * state_log.LOG_MIN
    assert not (folder / "state.log").exists()
    assert orjson.loads((folder / "state.json").read_bytes())["k"]["big"] == "y" * (
        state_log.LOG_MIN
    )
    s["n"] = 2
    assert read_run_states(folder)["k"]["n"] == 2


def test_a_log_a_kill_left_is_settled_by_the_first_read(tmp_path: Path) -> None:
    """A kill (or a power cut) before the run let go: state.json may be behind the log.
    While the run is held its log is read and never settled; once no process holds it,
    the first read makes state.json the log's newest, durably, and removes the log."""
    folder = _run_dir(tmp_path)
    store = StateFile(folder / "state.json")
    s = store.state("k")
    s["n"] = 1
    s["n"] = 2
    os.utime(folder / "state.json", ns=(0, 0))  # a power cut undid its last publish:
    (folder / "state.json").write_bytes(b'{"k":{"n":1}}')  # older than the log
    os.utime(folder / "state.json", ns=(0, 0))
    assert read_run_states(folder) == {"k": {"n": 2}}
    assert state_log.settle(folder) == state_log.Settled.HELD  # its process keeps the log
    assert (folder / "state.log").exists()
    _killed(folder)
    assert read_run_states(folder) == {"k": {"n": 2}}
    assert orjson.loads((folder / "state.json").read_bytes()) == {"k": {"n": 2}}
    assert not (folder / "state.log").exists()


def test_the_log_gives_its_blocks_back_before_its_name_goes(tmp_path: Path) -> None:
    """Guards against e2fsck exit 4 on ext2 (issue 27): a log removed with its blocks
    still listed by its inode on disk had a power cut bring it back claiming the block a
    new record folder took since. At the run's end and at a settle the log is emptied
    (and synced) before it is unlinked: a descriptor kept on it sees no byte left."""
    for settled in (False, True):
        folder = tmp_path / ("settled" if settled else "ended") / RUN
        folder.mkdir(parents=True)
        store = StateFile(folder / "state.json")
        store.state("k")["n"] = 1
        fd = os.open(folder / "state.log", os.O_RDONLY)
        try:
            assert os.fstat(fd).st_size == state_log.LOG_MIN
            if settled:  # killed: the next run settles its log
                wait_for(lambda f=folder: (f / "state.json").exists())
                assert state_log.settle(folder) == state_log.Settled.SETTLED
            else:
                store.close()
            assert not (folder / "state.log").exists()
            assert (os.fstat(fd).st_size, os.fstat(fd).st_blocks) == (0, 0)
        finally:
            os.close(fd)
        assert read_run_states(folder) == {"k": {"n": 1}}


def test_a_resumed_process_goes_on_from_the_logs_newest_record(tmp_path: Path) -> None:
    folder = _run_dir(tmp_path)
    first = StateFile(folder / "state.json")
    first.state("k")["n"] = 1
    newest = state_log.newest(folder)
    assert newest is not None
    second = StateFile(folder / "state.json")
    second.adopt(read_run_states(folder))
    second.state("k")["n"] = 2
    after = state_log.newest(folder)
    assert after is not None and after.seq == newest.seq + 1 and after.end > newest.end
    assert read_run_states(folder) == {"k": {"n": 2}}


@pytest.mark.parametrize("planted", ["fifo", "link", "folder"])
def test_a_log_planted_as_something_else_is_never_read_or_written_through(
    tmp_path: Path, planted: str
) -> None:
    """A FIFO, a link (to a file outside) or a folder where the log goes: readers read
    state.json without waiting; the writer never writes through it."""
    folder = _run_dir(tmp_path)
    (folder / "state.json").write_bytes(b'{"k":{"n":1}}')
    outside = tmp_path / "outside"
    outside.write_bytes(b"keep")
    log = folder / "state.log"
    if planted == "fifo":
        os.mkfifo(log)
    elif planted == "link":
        log.symlink_to(outside)
    else:
        log.mkdir()
    assert read_run_states(folder) == {"k": {"n": 1}}
    warnings: list[str] = []
    store = StateFile(folder / "state.json", warnings.append)
    store.adopt(read_run_states(folder))
    store.state("k")["n"] = 2
    assert outside.read_bytes() == b"keep"
    assert read_run_states(folder) == {"k": {"n": 2}}
    store.close()
    assert orjson.loads((folder / "state.json").read_bytes()) == {"k": {"n": 2}}


def test_the_record_header_is_what_the_docs_say() -> None:
    """docs/records.md describes the layout: magic, seq, kind, length, CRC-32 — 24 bytes."""
    record = state_log._record(0, 1, state_log.FULL, b"{}")
    magic, seq, kind, length, _ = struct.unpack_from("<4sQB3xII", record)
    assert (magic, seq, kind, length, len(record)) == (b"FDsl", 1, 1, 2, 26)


def _killed_after(tmp_path: Path, values: list[int]) -> Path:
    """A run that set ``n`` to each of ``values``, then was killed (its log left)."""
    folder = _run_dir(tmp_path)
    store = StateFile(folder / "state.json")
    s = store.state("k")
    for n in values:
        s["n"] = n
    _killed(folder)
    return folder


@pytest.mark.parametrize("left", [b"\0" * 19, b"", b'{"k":{"n"\0\0\0\0'])
def test_what_a_power_cut_left_of_state_json_is_rewritten_at_the_first_read(
    tmp_path: Path, left: bytes
) -> None:
    """Issue 37: after a power cut state.json was 19 NUL bytes until something settled
    the run. The first read of a dead run makes it whole: the log's newest, the log gone."""
    folder = _killed_after(tmp_path, [1, 2, 3])
    (folder / "state.json").write_bytes(left)
    assert read_run_states(folder) == {"k": {"n": 3}}
    assert orjson.loads((folder / "state.json").read_bytes()) == {"k": {"n": 3}}
    assert not (folder / "state.log").exists()


def test_a_state_json_the_run_published_before_is_its_own_and_the_log_wins(
    tmp_path: Path,
) -> None:
    """A save the log still holds (a kill between the log's record and the file's
    rename) is the run's own file, not an edit."""
    folder = _killed_after(tmp_path, [1, 2, 3])
    (folder / "state.json").write_bytes(orjson.dumps({"k": {"n": 2}}))
    assert read_run_states(folder) == {"k": {"n": 3}}
    assert not (folder / "state.log").exists()


def test_a_hand_edit_of_a_dead_runs_state_json_is_honoured_and_said(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 37: the log silently won over a person's edit (n → 1000000 came back 34).
    Valid JSON equal to no saved record is an edit: it is the state, a warning names
    the file, and the log is set aside so that it never wins later."""
    folder = _killed_after(tmp_path, [33, 34])
    edit = b'{"k": {"n": 1000000}}\n'
    (folder / "state.json").write_bytes(edit)
    assert read_run_states(folder) == {"k": {"n": 1000000}}
    assert (folder / "state.json").read_bytes() == edit  # left as the person wrote it
    said = capsys.readouterr().err
    assert str(folder / "state.json") in said and "edited" in said
    assert not (folder / "state.log").exists()
    assert (folder / state_log.SET_ASIDE).exists()  # the saves it held, kept aside
    assert read_run_states(folder) == {"k": {"n": 1000000}}  # and again: said once
    assert capsys.readouterr().err == ""


def test_a_hand_edit_that_is_not_json_is_refused_and_left_as_it_was(tmp_path: Path) -> None:
    """INT-15: text that is not JSON is refused, naming the file, and never replaced by
    the log's newest; fixed by hand later, the fix is honoured."""
    folder = _killed_after(tmp_path, [4, 5])
    broken = b'{"setter": {"n": 5,'
    (folder / "state.json").write_bytes(broken)
    for _ in range(2):
        with pytest.raises(UnusableStateError, match=r"state\.json is not valid JSON"):
            read_run_states(folder)
        assert (folder / "state.json").read_bytes() == broken
        assert (folder / "state.log").exists()
    (folder / "state.json").write_bytes(b'{"setter": {"n": 6}}')
    assert read_run_states(folder) == {"setter": {"n": 6}}


@pytest.mark.parametrize("how", ["bind mount", "folder"])
def test_a_state_json_that_cannot_be_replaced_never_stops_the_log(tmp_path: Path, how: str) -> None:
    """Issue 36 item 3: with state.json impossible to replace (a bind mount over it: EBUSY
    on the rename), the publish at the log's lap failed and every later save with it —
    n=360 kept of 1100. Each lap now starts a new log: every save is kept and read."""
    folder = _run_dir(tmp_path)
    if how == "bind mount":
        if os.geteuid() != 0 or shutil.which("mount") is None:
            pytest.skip("a bind mount needs root")
        (folder / "state.json").write_bytes(b'{"k": {}}')
        source = tmp_path / "elsewhere.json"
        source.write_bytes(b'{"k": {}}')
        mounted = subprocess.run(
            ["mount", "--bind", str(source), str(folder / "state.json")], capture_output=True
        )
        if mounted.returncode != 0:
            pytest.skip(f"no bind mount here: {mounted.stderr!r}")
    else:
        (folder / "state.json").mkdir()
    try:
        warnings: list[str] = []
        store = StateFile(folder / "state.json", warnings.append)
        s = store.state("k", {"pad": "p" * 300})
        for n in range(1, 601):  # three laps of the log
            s["n"] = n
            found = state_log.newest(folder)
            assert found is not None and orjson.loads(found.payload)["k"]["n"] == n
        assert not any("not saved" in w for w in warnings), warnings
        assert sum("state.json not replaced" in w for w in warnings) == 1
        store.close()
        assert any("stays in state.log" in w for w in warnings), warnings
        _killed(folder)
        assert read_run_states(folder)["k"]["n"] == 600  # what the next run picks up
    finally:
        if how == "bind mount":
            subprocess.run(["umount", str(folder / "state.json")], check=True)
