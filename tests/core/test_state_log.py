"""The run's state log (records/state_log.py; issue 28): a key set durable at one flush.

What a power cut can leave is tested by bench/powercut.py (tests/test_powercut.py); here,
the rules that make it hold: the newest whole record wins, a torn or foreign one never
does, a wrap makes state.json durable first, every reader reads the log first, the run's
end leaves state.json whole and no log, and a log a kill left is settled by the next run.
"""

from __future__ import annotations

import os
import struct
from pathlib import Path

import orjson
import pytest

from flowdrop_tui.core.files import locks
from flowdrop_tui.core.records import state_log
from flowdrop_tui.core.records.state import StateFile, read_run_states
from tests.conftest import wait_for

RUN = "20261202T000000.000Z-abcdef"


def _run_dir(tmp_path: Path) -> Path:
    folder = tmp_path / RUN
    folder.mkdir()
    return folder


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


def test_a_log_a_kill_left_is_read_first_and_settled_by_the_next_run(tmp_path: Path) -> None:
    """A kill (or a power cut) before the run let go: state.json may be behind the log.
    Readers read the log; ``settle`` — the next run, ``reindex`` — makes state.json the
    log's newest, durably, and removes the log; never while the run is held."""
    folder = _run_dir(tmp_path)
    store = StateFile(folder / "state.json")
    s = store.state("k")
    s["n"] = 1
    s["n"] = 2
    # the process is then killed (its publisher done: it would race this test's writes)
    wait_for(lambda: orjson.loads((folder / "state.json").read_bytes()) == {"k": {"n": 2}})
    (folder / "state.json").write_bytes(b'{"k":{"n":0}}')  # a power cut left it older
    assert read_run_states(folder) == {"k": {"n": 2}}
    locks.acquire(folder / "live.lock")
    try:
        assert state_log.settle(folder) is False  # held: its process keeps the log
    finally:
        locks.release(folder / "live.lock")
    assert state_log.settle(folder) is True
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
                assert state_log.settle(folder) is True
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
