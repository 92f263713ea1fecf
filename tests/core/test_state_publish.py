"""``state.json`` swapped with its spare at each key set (records/state_publish.py; issue 28).

The rules that make the swap safe: ``state.json`` holds each save when the key set
returns; a reader never sees a file change under it (a reader holding the file open
keeps what it opened, and one reading all the time never reads a torn or older state);
nothing planted at the spare's name is written through; a refusal from the filesystem
(no leases, no exchange), a flow handling SIGURG or an exception from a signal handler
mid-swap never publish an older save; the run's end leaves no spare, and a kill's spare
is removed when the run is settled. And the state log is made apart from the run's
other inodes (files/placement.py), which is where the speed comes from.
"""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import orjson
import pytest

from flowdrop_tui.core.files import placement
from flowdrop_tui.core.files.regular import open_regular
from flowdrop_tui.core.paths import state_spare
from flowdrop_tui.core.records import state_publish
from flowdrop_tui.core.records.state import StateFile
from tests.conftest import CLI, events, state_of, wait_for, write_flow

RUN = "20261202T000000.000Z-abcdef"


def _run_dir(tmp_path: Path) -> Path:
    folder = tmp_path / ".flowdrop" / "runs" / RUN
    folder.mkdir(parents=True)
    return folder


def _published(folder: Path) -> Any:
    return orjson.loads((folder / "state.json").read_bytes())


def test_each_key_set_swaps_two_files_and_state_json_holds_it(tmp_path: Path) -> None:
    folder = _run_dir(tmp_path)
    spare = state_spare(folder)
    assert spare == tmp_path / ".flowdrop" / "spares" / RUN  # outside the run's folder
    store = StateFile(folder / "state.json")
    s = store.state("k")
    inodes = set()
    for n in range(60):
        s["n"] = n
        s["pad"] = "x" * (n % 7) * 300  # sizes up and down: the spare is cut to each
        assert _published(folder) == {"k": {"n": n, "pad": "x" * (n % 7) * 300}}
        inodes.add((folder / "state.json").stat().st_ino)
    assert len(inodes) == 2, inodes  # the same two files, swapped: no new file per key set
    assert spare.is_file()
    assert not any(p.name.endswith(".tmp") for p in folder.iterdir())
    store.close()
    assert not spare.exists()  # the run lets go: no spare left
    assert not (folder / "state.log").exists()
    assert _published(folder) == {"k": {"n": 59, "pad": "x" * 3 * 300}}


def test_a_reader_holding_state_json_open_keeps_what_it_opened(tmp_path: Path) -> None:
    """The file a reader holds is never rewritten: when it comes round as the spare, the
    lease is refused (it is open) and that save is published by a new file."""
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
    s["n"] = 12  # let go of: back to swapping
    assert _published(folder) == {"k": {"n": 12}}
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
        from flowdrop_tui.core.records.state import StateFile
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


@pytest.mark.parametrize("refusal", ["no leases", "no exchange", "a SIGURG handler"])
def test_without_the_swap_every_save_is_a_new_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, refusal: str
) -> None:
    folder = _run_dir(tmp_path)
    calls: list[int] = []
    if refusal == "no leases":
        real = state_publish.fcntl.fcntl

        def fcntl(fd: int, cmd: int, arg: int = 0) -> Any:
            if cmd == state_publish.fcntl.F_SETLEASE and arg != state_publish.fcntl.F_UNLCK:
                raise OSError(errno.EINVAL, "leases are off")
            return real(fd, cmd, arg)

        monkeypatch.setattr(state_publish.fcntl, "fcntl", fcntl)
    elif refusal == "no exchange":
        monkeypatch.setattr(state_publish._Libc, "exchange", lambda *a: errno.EINVAL)
    else:
        monkeypatch.setattr(signal, "signal", signal.signal)  # restored after
        signal.signal(signal.SIGURG, lambda *_: calls.append(1))
    store = StateFile(folder / "state.json")
    s = store.state("k")
    for n in range(20):
        s["n"] = n
        assert _published(folder) == {"k": {"n": n}}
        spare = state_spare(folder)
        # new files: the spare is gone for good, or (a handler) never written
        assert not spare.exists() or spare.stat().st_size == 0
    store.close()
    if refusal == "a SIGURG handler":
        signal.signal(signal.SIGURG, signal.SIG_DFL)
        assert not calls
    assert not state_spare(folder).exists()
    assert _published(folder) == {"k": {"n": 19}}


@pytest.mark.parametrize("at", range(12))
def test_an_exception_mid_swap_never_publishes_an_older_save(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, at: int
) -> None:
    """A signal handler that raises (the flow's own Ctrl-C) can land between any two steps
    of a swap. Whatever the step, the save raising is the only one not sure to be in
    ``state.json``; the next key set publishes itself, and all later ones do."""
    folder = _run_dir(tmp_path)
    store = StateFile(folder / "state.json")
    s = store.state("k")
    for n in range(3):
        s["n"] = n  # swapping already
    steps = {"n": 0}

    def count(real: Any) -> Any:
        def step(*args: Any, **kw: Any) -> Any:
            steps["n"] += 1
            if steps["n"] == at + 1:
                raise KeyboardInterrupt
            return real(*args, **kw)

        return step

    for name in ("pwrite", "ftruncate", "close", "open", "fstat"):
        monkeypatch.setattr(state_publish.os, name, count(getattr(os, name)))
    monkeypatch.setattr(state_publish.fcntl, "fcntl", count(state_publish.fcntl.fcntl))
    monkeypatch.setattr(state_publish._Libc, "exchange", count(state_publish._Libc.exchange))
    monkeypatch.setattr(state_publish._Libc, "identity", count(state_publish._Libc.identity))
    try:
        s["n"] = 100
    except KeyboardInterrupt:
        pass
    monkeypatch.undo()
    spare = state_spare(folder)
    if spare.exists():  # no lease left held: an open of it does not wait (nor fail)
        os.close(os.open(spare, os.O_RDONLY | os.O_NONBLOCK))
    for n in range(101, 106):
        s["n"] = n
        assert _published(folder) == {"k": {"n": n}}, (at, n)
    before = len(os.listdir("/proc/self/fd"))
    for n in range(106, 130):
        s["n"] = n
    assert len(os.listdir("/proc/self/fd")) <= before  # nothing leaks from here on
    store.close()
    assert _published(folder) == {"k": {"n": 129}}
    assert not state_spare(folder).exists()


def test_state_json_replaced_by_hand_is_never_swapped_away(tmp_path: Path) -> None:
    folder = _run_dir(tmp_path)
    store = StateFile(folder / "state.json")
    s = store.state("k")
    for n in range(3):
        s["n"] = n
    mine = folder / "mine.json"
    mine.write_bytes(b'{"by": "hand"}')
    os.replace(mine, folder / "state.json")
    for n in range(3, 10):
        s["n"] = n
        assert _published(folder) == {"k": {"n": n}}
    assert not any(b"hand" in p.read_bytes() for p in folder.iterdir() if p.is_file())
    store.close()


def test_a_link_planted_at_the_spare_is_never_written_through(tmp_path: Path) -> None:
    folder = _run_dir(tmp_path)
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    spare = state_spare(folder)
    spare.parent.mkdir(parents=True)
    spare.symlink_to(victim)
    store = StateFile(folder / "state.json")
    s = store.state("k")
    for n in range(10):
        s["n"] = n
        assert _published(folder) == {"k": {"n": n}}
    assert victim.read_text() == "keep me"
    assert not spare.is_symlink()
    store.close()
    assert victim.read_text() == "keep me"


def test_the_state_log_is_made_apart_from_the_runs_other_inodes(tmp_path: Path) -> None:
    folder = _run_dir(tmp_path)
    for name in ("cycle.jsonl", "output.log", "live.lock"):
        (folder / name).write_text("")
    store = StateFile(folder / "state.json")
    s = store.state("k")
    s["n"] = 1
    log = (folder / "state.log").stat().st_ino
    others = [folder, state_spare(folder), *(p for p in folder.iterdir() if p.name != "state.log")]
    assert placement.block_of(log) not in {placement.block_of(p.stat().st_ino) for p in others}
    assert not [p for p in folder.iterdir() if ".new-" in p.name]  # candidates removed
    store.close()


def test_a_reader_meeting_a_lease_looks_the_name_up_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An open that meets the spare's write lease (``state.json`` looked up just before a
    swap) fails at once under ``O_NONBLOCK``; looked up again, the name is the new file."""
    from flowdrop_tui.core.files import regular

    target = tmp_path / "state.json"
    target.write_text("{}")
    real = regular.open_fd
    met = {"n": 0}

    def leased_once(path: Any, flags: int, *a: Any, **kw: Any) -> int:
        if not met["n"]:
            met["n"] += 1
            raise BlockingIOError(errno.EWOULDBLOCK, "a lease")
        return real(path, flags, *a, **kw)

    monkeypatch.setattr(regular, "open_fd", leased_once)
    fd = open_regular(target)
    os.close(fd)
    assert met["n"] == 1


def test_a_killed_runs_spare_goes_when_its_run_is_settled(workspace: Path, cli: CLI) -> None:
    """A real run: its spare is at .flowdrop/spares/<run-id> while it runs, gone at its
    end; after kill -9 it stays until the run is settled (here by ``reindex``)."""
    write_flow(
        workspace,
        "tick",
        """
        from flowdrop_tui import flow

        @flow()
        def main(run):
            n = 0
            while not run.stop_requested:
                n += 1
                run.state["n"] = n
        """,
    )
    run_id = cli.json("run", "tick", "--detach")["run"]
    run_dir = workspace / ".flowdrop" / "runs" / run_id
    wait_for(lambda: state_of(workspace, run_id).get("tick", {}).get("n", 0) > 50)
    spare = state_spare(run_dir)
    assert spare.is_file()
    assert not [p.name for p in run_dir.iterdir() if "spare" in p.name]
    pid = int((run_dir / "live.lock").read_text())
    os.kill(pid, signal.SIGKILL)
    wait_for(lambda: not os.path.exists(f"/proc/{pid}") or _zombie(pid))
    last = state_of(workspace, run_id)["tick"]["n"]
    assert spare.exists()
    cli("reindex")
    assert not spare.exists()
    assert not (run_dir / "state.log").exists()
    assert orjson.loads((run_dir / "state.json").read_bytes()) == {"tick": {"n": last}}

    run_id = cli.json("run", "tick", "--detach")["run"]
    run_dir = workspace / ".flowdrop" / "runs" / run_id
    wait_for(lambda: state_of(workspace, run_id).get("tick", {}).get("n", 0) > 5)
    cli("stop", run_id, "--wait", timeout=30)
    assert events(workspace, run_id)[-1]["event"] == "ended"
    assert not state_spare(run_dir).exists()
    assert list((workspace / ".flowdrop" / "spares").iterdir()) == []


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1].startswith("Z")
    except OSError:
        return True


@pytest.mark.parametrize("layout", ["run folder", "elsewhere"])
def test_opening_the_spare_while_key_sets_go_on_never_ends_the_run(
    tmp_path: Path, layout: str
) -> None:
    """A lease's break is said with a signal; letting a lease go set it back to SIGIO,
    whose default ends the process, so the second open of a leased spare (``grep -r``
    over the workspace) killed the run. Openers of every kind, all the time: the
    writer ends by itself, its last save in ``state.json``."""
    folder = _run_dir(tmp_path) if layout == "run folder" else tmp_path / "plain"
    folder.mkdir(exist_ok=True)
    spare = state_spare(folder)
    done = tmp_path / "writer.done"
    writer = textwrap.dedent(
        f"""
        from pathlib import Path
        from flowdrop_tui.core.records.state import StateFile
        store = StateFile(Path({str(folder)!r}) / "state.json")
        s = store.state("k")
        for n in range(1, 3001):
            s["n"] = n
        store.close()
        Path({str(done)!r}).write_text("ok")
        """
    )
    opener = textwrap.dedent(
        """
        import os, sys, time
        path, done, flags = sys.argv[1], sys.argv[2], int(sys.argv[3])
        opened = 0
        deadline = time.monotonic() + 300  # never outlives a test that was stopped
        while not os.path.exists(done) and time.monotonic() < deadline:
            try:
                os.close(os.open(path, flags))
                opened += 1
            except OSError:
                pass
        print(opened)
        """
    )
    openers = [
        subprocess.Popen(
            [sys.executable, "-c", opener, str(spare), str(done), str(flags)],
            stdout=subprocess.PIPE,
            text=True,
        )
        for flags in (os.O_RDONLY, os.O_RDONLY | os.O_NONBLOCK)
    ]
    try:
        run = subprocess.run([sys.executable, "-c", writer], capture_output=True, timeout=300)
    finally:
        done.write_text("over")  # the openers stop, however the writer ended
    for proc in openers:
        proc.communicate(timeout=60)
    assert run.returncode == 0, (run.returncode, run.stderr)
    assert _published(folder) == {"k": {"n": 3000}}


def test_a_hard_link_to_state_json_keeps_what_it_named(tmp_path: Path) -> None:
    """A second name someone gives state.json (a hard-link backup, ``cp -al``) is theirs:
    the file is never rewritten as the spare, nor emptied at the run's end."""
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


def test_pruning_a_run_removes_the_spare_a_kill_left(tmp_path: Path) -> None:
    from flowdrop_tui.core.paths import Layout
    from flowdrop_tui.core.records import trash

    layout = Layout(tmp_path)
    folder = _run_dir(tmp_path)
    spare = state_spare(folder)
    spare.parent.mkdir()
    spare.write_bytes(b'{"k": {}}')
    assert trash.discard(layout, RUN)
    trash.purge(layout, RUN)
    assert not spare.exists()
    assert not (layout.trash / RUN).exists()


def test_a_storm_of_ctrl_c_during_key_sets_leaves_no_signal_blocked_nor_lease_held(
    tmp_path: Path,
) -> None:
    """A flow that catches its Ctrl-C and goes on, under SIGINTs sent as fast as a shell
    can: whatever step each lands in, the thread keeps no signal blocked (holding them
    off during the swap once left them all blocked for good), no lease is left held,
    and the last key set is in ``state.json``."""
    folder = _run_dir(tmp_path)
    child = textwrap.dedent(
        f"""
        import os, signal, subprocess, sys
        from pathlib import Path
        from flowdrop_tui.core.records.state import StateFile
        from flowdrop_tui.core.paths import state_spare
        folder = Path({str(folder)!r})
        store = StateFile(folder / "state.json")
        s = store.state("k")
        armed = False
        def on_int(sig, frame):
            if armed:
                raise KeyboardInterrupt
        signal.signal(signal.SIGINT, on_int)
        sender = subprocess.Popen(
            ["/bin/sh", "-c", f"while kill -INT {{os.getpid()}} 2>/dev/null; do :; done"]
        )
        n = interrupted = 0
        while interrupted < 200 and n < 20000:
            try:
                n += 1
                armed = True
                s["n"] = n
                armed = False
            except KeyboardInterrupt:
                armed = False
                interrupted += 1
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        sender.kill()
        sender.wait()
        s["n"] = -1
        blocked = [
            line.split()[1] for line in open("/proc/thread-self/status")
            if line.startswith("SigBlk")
        ]
        spare = state_spare(folder)
        if spare.exists():
            os.close(os.open(spare, os.O_RDONLY | os.O_NONBLOCK))  # no lease held
        print(interrupted, int(blocked[0], 16))
        store.close()
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", child], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    interrupted, blocked = map(int, done.stdout.split())
    assert interrupted > 0
    assert blocked == 0
    assert _published(folder) == {"k": {"n": -1}}
