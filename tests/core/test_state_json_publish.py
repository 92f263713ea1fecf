"""``state.json`` written again at every key set, the plain way (records/flow_state/state_log.py's
``Keeper``): a new file renamed over, not synced — the state log is the durable copy.

What a reader of the file sees: each save whole when the key set returns; a reader
holding the file open keeps what it opened; one reading all the time never reads a
torn or older state; a second name someone gave the file keeps what it named.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import orjson

from flowdrop_tui.core.records.flow_state.state import StateFile

RUN = "20261202T000000.000Z-abcdef"


def _run_dir(tmp_path: Path) -> Path:
    folder = tmp_path / ".flowdrop" / "runs" / RUN
    folder.mkdir(parents=True)
    return folder


def _published(folder: Path) -> Any:
    return orjson.loads((folder / "state.json").read_bytes())


def test_a_reader_holding_state_json_open_keeps_what_it_opened(tmp_path: Path) -> None:
    """The file a reader holds is never rewritten: each save is a new file."""
    folder = _run_dir(tmp_path)
    store = StateFile(folder / "state.json")
    s = store.state("k")
    s["n"] = 1
    held = os.open(folder / "state.json", os.O_RDONLY)
    try:
        for n in range(2, 12):
            s["n"] = n
            assert _published(folder) == {"k": {"n": n}}
            assert orjson.loads(os.pread(held, 4096, 0)) == {"k": {"n": 1}}
    finally:
        os.close(held)
    store.close()


def test_readers_reading_all_the_time_never_see_a_torn_or_older_state(tmp_path: Path) -> None:
    """Real processes: a writer setting keys back to back (sizes changing), three readers
    opening and parsing ``state.json`` as fast as they can, one of them holding each open
    a while first. Every read is whole JSON, and no reader sees the count go back."""
    folder = _run_dir(tmp_path)
    done = tmp_path / "writer.done"
    writer = textwrap.dedent(
        f"""
        from pathlib import Path
        from flowdrop_tui.core.records.flow_state.state import StateFile
        store = StateFile(Path({str(folder)!r}) / "state.json")
        s = store.state("k")
        for n in range(1, 4001):
            s["v"] = {{"n": n, "pad": "y" * ((n * 37) % 5000)}}  # one key set
        store.close()
        Path({str(done)!r}).write_text("ok")
        """
    )
    reader = textwrap.dedent(
        """
        import json, os, sys, time
        path, done, hold = sys.argv[1], sys.argv[2], float(sys.argv[3])
        last = reads = 0
        deadline = time.monotonic() + 300  # never outlives a test that was stopped
        while not os.path.exists(done) and time.monotonic() < deadline:
            try:
                fd = os.open(path, os.O_RDONLY)
            except FileNotFoundError:
                continue
            try:
                if hold:
                    time.sleep(hold)
                raw = b""
                while chunk := os.read(fd, 1 << 16):
                    raw += chunk
            finally:
                os.close(fd)
            state = json.loads(raw)["k"]  # raises on a torn file
            if not state and not last:
                continue  # the state the run starts with, before its first key set
            state = state["v"]
            assert state["n"] >= last, (state["n"], last)
            assert state["pad"] == "y" * ((state["n"] * 37) % 5000), state["n"]
            last, reads = state["n"], reads + 1
        print(reads, last)
        """
    )
    (folder / "state.json").write_bytes(b'{"k": {"v": {"n": 0, "pad": ""}}}')
    readers = [
        subprocess.Popen(
            [sys.executable, "-c", reader, str(folder / "state.json"), str(done), hold],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for hold in ("0", "0", "0.0005")
    ]
    run = subprocess.run(
        [sys.executable, "-c", writer], capture_output=True, text=True, timeout=300
    )
    assert run.returncode == 0, run.stderr
    for proc in readers:
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
        reads, _ = map(int, out.split())
        assert reads > 10, out
    assert _published(folder)["k"]["v"]["n"] == 4000


def test_a_hard_link_to_state_json_keeps_what_it_named(tmp_path: Path) -> None:
    """A second name someone gives state.json (a hard-link backup, ``cp -al``) is theirs:
    the file is never rewritten, nor emptied at the run's end."""
    folder = _run_dir(tmp_path)
    store = StateFile(folder / "state.json")
    s = store.state("k")
    for n in range(4):
        s["n"] = n
    snapshot = tmp_path / "snapshot.json"
    os.link(folder / "state.json", snapshot)
    for n in range(4, 12):
        s["n"] = n
        assert _published(folder) == {"k": {"n": n}}
        assert orjson.loads(snapshot.read_bytes()) == {"k": {"n": 3}}
    store.close()
    assert orjson.loads(snapshot.read_bytes()) == {"k": {"n": 3}}
    assert _published(folder) == {"k": {"n": 11}}


def test_a_state_outgrowing_the_log_never_empties_a_file_a_reader_holds(
    tmp_path: Path,
) -> None:
    folder = _run_dir(tmp_path)
    store = StateFile(folder / "state.json")
    s = store.state("k")
    s["n"] = 1
    s["n"] = 2
    held = os.open(folder / "state.json", os.O_RDONLY)
    try:
        s["big"] = "z" * 40000  # more than a quarter of the log: written durably, log removed
        s["n"] = 3
        assert not (folder / "state.log").exists()
        assert orjson.loads(os.pread(held, 4096, 0)) == {"k": {"n": 2}}
    finally:
        os.close(held)
    assert _published(folder)["k"]["n"] == 3
    store.close()
