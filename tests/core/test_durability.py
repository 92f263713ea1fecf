"""Data loss: hostile flows, full disks, re-entrant saves, clock steps
(docs/decisions.md, "Durability").

Each test names the numbered item of the durability work it guards; every one failed
on the main that work started from (ea35e71). Power cuts (items 1 and 2) are in
tests/harnesses/test_powercut.py, on loop-mounted filesystem images.
"""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import orjson
import pytest

from flowdrop_tui.core.paths import Layout
from flowdrop_tui.core.records.listing import index
from tests.conftest import CLI, events, state_of, wait_for, write_flow
from tests.flow_bodies import ADDS_ONE_A_RUN


def _only_run(ws: Path) -> str:
    runs = sorted(
        p.name for p in (ws / ".flowdrop" / "runs").iterdir() if not p.name.startswith(".")
    )
    assert len(runs) == 1, runs
    return runs[0]


# -- item 3: a flow that closes stdout ---------------------------------------------------------


def test_a_flow_that_closes_stdout_never_gets_its_output_into_a_record(
    workspace: Path, cli: CLI
) -> None:
    """Item 3: with fd 1 closed, the next file opened took fd 1 — the state writer's file —
    and a thread's os.write(1, …) landed in state.json, which was published."""
    write_flow(
        workspace,
        "closer",
        """
        import os, threading
        from flowdrop_tui import flow

        @flow()
        def main(run):
            os.close(1)
            done = threading.Event()

            def chatter():
                while not done.is_set():
                    try:
                        os.write(1, b"JUNK-FROM-A-THREAD ")
                    except OSError:
                        pass

            thread = threading.Thread(target=chatter)
            thread.start()
            saved = os.path.join(run.workspace, ".flowdrop", "runs", run.run_id, "state.json")
            bad = []
            try:
                for n in range(200):
                    run.state["n"] = n
                    run.log("set", n=n)
                    with open(saved, "rb") as handle:  # what a reader sees now
                        raw = handle.read()
                    if b"JUNK" in raw or not raw.startswith(b'{"closer":'):
                        bad.append(raw[:60].decode(errors="replace"))
            finally:
                done.set()
                thread.join()
            run.state["bad"] = bad
            return "done"
        """,
    )
    done = cli("run", "closer", timeout=120)
    run_id = _only_run(workspace)
    folder = workspace / ".flowdrop" / "runs" / run_id
    for name in ("state.json", "cycle.jsonl", "output.log", "live.lock"):
        assert b"JUNK" not in (folder / name).read_bytes(), name
    assert state_of(workspace, run_id) == {"closer": {"n": 199, "bad": []}}
    assert [
        e["fields"]["n"] for e in events(workspace, run_id) if e.get("message") == "set"
    ] == list(range(200))
    assert events(workspace, run_id)[-1]["outcome"] == "completed"
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr


# -- item 4: a flow that forks -------------------------------------------------------------------


@pytest.mark.parametrize("how", ["sys.exit(0)", "raise RuntimeError('child failed')", "return"])
def test_a_forked_child_of_a_flow_never_writes_the_run_record(
    workspace: Path, cli: CLI, how: str
) -> None:
    """Item 4: a flow forks (no exec) and the child leaves the flow by sys.exit, an
    exception or a return: the child ended the run a second time and rewrote state.json
    back to its fork-time state after the parent had completed."""
    child_exit = how if how != "return" else "return 'child'"
    write_flow(
        workspace,
        "forker",
        f"""
        import os, sys, time
        from flowdrop_tui import flow

        @flow()
        def main(run):
            run.state["n"] = 2
            pid = os.fork()
            if pid == 0:
                time.sleep(0.5)        # the parent is done by now
                run.state["child"] = True
                {child_exit}
            for n in range(3, 11):
                run.state["n"] = n
            os.waitpid(pid, 0)
            return "parent"
        """,
    )
    done = cli("run", "forker", timeout=60)
    assert done.returncode == 0, done.stderr
    run_id = _only_run(workspace)
    time.sleep(0.3)
    assert state_of(workspace, run_id) == {"forker": {"n": 10}}
    evs = events(workspace, run_id)
    ended = [e for e in evs if e["event"] == "ended"]
    assert len(ended) == 1 and ended[0]["outcome"] == "completed"
    assert ended[0]["result"] == "parent"
    assert evs[-1]["event"] == "ended"


# -- item 5: the created event cannot be written ------------------------------------------------


def test_a_created_event_that_cannot_be_written_refuses_the_run_before_it_exists(
    workspace: Path, cli: CLI
) -> None:
    """Item 5: the file-size limit cuts the `created` line short (as a full disk does): the
    record was published and the flow run anyway, silently, then looked past."""
    write_flow(
        workspace,
        "f",
        """
        from flowdrop_tui import flow

        @flow(resumable=True)
        def main(run):
            run.state["ran"] = True
            return "ran"
        """,
    )
    cli("flows", check=0)  # describe it first: the description cache is written now
    limit = 300  # over the index and state files of a first run; under the created line

    def small_files() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    done = subprocess.run(
        [sys.executable, "-m", "flowdrop_tui", "run", "f"],
        cwd=workspace,
        capture_output=True,
        text=True,
        timeout=60,
        preexec_fn=small_files,
    )
    assert done.returncode == 3, (done.returncode, done.stdout, done.stderr)
    assert "could not create the run's record" in done.stderr
    assert "Traceback" not in done.stderr
    runs = workspace / ".flowdrop" / "runs"
    assert [p.name for p in runs.iterdir()] == []  # no run, no half-made folder
    assert index.lookup(Layout(workspace), "f") is None
    out = cli.json("run", "f")  # and nothing is in the way of the next run
    assert out["status"] == "completed" and out["start"] == "fresh"


# -- item 6: a clock stepped back ------------------------------------------------------------------


def test_a_rebuilt_index_orders_a_thread_by_its_pick_up_chain_not_the_clock(
    workspace: Path, cli: CLI
) -> None:
    """Item 6: a run picked up after the clock was stepped back starts 'earlier' than its
    source; a rebuild ordered by time then picked the older run up again."""
    write_flow(workspace, "c", ADDS_ONE_A_RUN)
    first = cli.json("run", "c")["run"]
    second = cli.json("run", "c")["run"]
    assert state_of(workspace, second) == {"c": {"n": 2}}
    # The second run's clock said an hour earlier: rewrite its times as such a clock would.
    runs = workspace / ".flowdrop" / "runs"
    stepped = "20000101T000000.000Z-" + second.rsplit("-", 1)[1]
    lines = []
    for line in (runs / second / "cycle.jsonl").read_bytes().splitlines():
        event = orjson.loads(line)
        event["t"] = "2000-01-01T00:00:00.000Z"
        if "run" in event:
            event["run"] = stepped
        lines.append(orjson.dumps(event))
    (runs / second / "cycle.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    (runs / second).rename(runs / stepped)
    cli("reindex", check=0)
    entry = index.lookup(Layout(workspace), "c")
    assert entry is not None and entry["source"] == stepped and entry["last_run"] == stepped
    third = cli.json("run", "c")
    assert third["picked_up_from"] == stepped
    assert state_of(workspace, third["run"]) == {"c": {"n": 3}}
    assert first != stepped


def test_chain_order_puts_a_run_after_its_source_and_time_breaks_only_ties() -> None:
    """Item 6, the rule itself: links first (even against the clock), then time."""
    from flowdrop_tui.core.records.listing.index import _chain_order

    runs = {
        "a": ("2026-01-01T10:00", None),
        "b": ("2026-01-01T09:00", "a"),  # picked up from a, clock stepped back
        "c": ("2026-01-01T08:00", "b"),
        "fresh": ("2026-01-01T09:30", None),  # another chain, started before a's time
        "loop1": ("2026-01-01T07:00", "loop2"),  # forged links that go round
        "loop2": ("2026-01-01T07:00", "loop1"),
    }
    order = _chain_order(runs)
    assert max(runs, key=order.__getitem__) == "c"
    assert order["a"] < order["b"] < order["c"]
    assert order["fresh"] < order["a"]
    assert set(order) == set(runs)


# -- item 7: full disk ---------------------------------------------------------------------------


def test_a_completed_run_whose_stdout_is_full_still_exits_0(workspace: Path) -> None:
    """Item 7: stdout on a full disk (/dev/full) made a completed run exit 1 with a
    traceback when the final output could not be flushed."""
    write_flow(
        workspace,
        "f",
        """
        from flowdrop_tui import flow

        @flow()
        def main(run):
            for r in run.rounds(range(3)):
                print("round", r)
                run.state["r"] = r
            return "ok"
        """,
    )
    for args in (["run", "f"], ["run", "f", "--json"]):
        with open("/dev/full", "w") as full:
            done = subprocess.run(
                [sys.executable, "-m", "flowdrop_tui", *args],
                cwd=workspace,
                stdout=full,
                stderr=subprocess.PIPE,
                text=True,
                timeout=60,
            )
        assert done.returncode == 0, done.stderr
        assert "Traceback" not in done.stderr and "Exception ignored" not in done.stderr
        assert "completed" in done.stderr


def _mount_tmpfs(where: Path, size: str) -> None:
    where.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (needs root): {done.stderr.strip()}")


def test_a_full_disk_keeps_the_final_save_when_only_two_copies_fit(tmp_path: Path) -> None:
    """Item 7: the in-place writer kept two spares (three copies of the state) while saves
    failed, so on a disk with room for two copies the final save was lost — the run ended
    at round 400 with an old state saved. The plain writer needs two copies, briefly."""
    disk = tmp_path / "disk"
    _mount_tmpfs(disk, "1m")
    try:
        subprocess.run(["git", "init", "-q", str(disk / "ws")], check=True)
        ws = disk / "ws"
        write_flow(
            ws,
            "big",
            """
            from flowdrop_tui import flow

            @flow(resumable=True)
            def main(run):
                pad = "x" * 120_000
                for r in run.rounds(range(40)):
                    run.state["pad"] = pad
                    run.state["n"] = r
                return "done"
            """,
        )
        cli = CLI(ws)
        cli("flows", check=0)
        # Leave room for the records, state.json and one copy being written: not three.
        filler = disk / "filler"
        free = os.statvfs(disk)
        room = free.f_bavail * free.f_frsize
        filler.write_bytes(b"\0" * max(0, room - 300_000))
        done = cli("run", "big", timeout=120)
        run_id = _only_run(ws)
        assert done.returncode == 0, done.stderr
        assert state_of(ws, run_id)["big"]["n"] == 39
        warnings = [e for e in events(ws, run_id) if e["event"] == "warning"]
        assert warnings == [], warnings
        assert sorted(p.name for p in (ws / ".flowdrop" / "runs" / run_id).iterdir()) == [
            "cycle.jsonl",
            "live.lock",
            "output.log",
            "requests",
            "sessions",
            "state.json",
        ]
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)


def test_a_really_full_tmpfs_keeps_the_last_save_and_saves_again_when_room_returns(
    tmp_path: Path,
) -> None:
    """Item 7 on a real full filesystem: failed writes hold no space (the temporary file is
    removed at once), and saving goes on. Since the state log (issue 28) a key set made
    while the disk is full is still saved whole — into the log's blocks, which exist —
    and ``state.json`` (a new file at each key set) catches up once there is room."""
    disk = tmp_path / "disk"
    _mount_tmpfs(disk, "512k")
    try:
        ws = disk / "ws"
        subprocess.run(["git", "init", "-q", str(ws)], check=True)
        write_flow(
            ws,
            "fill",
            """
            import os
            from pathlib import Path
            from flowdrop_tui import flow

            @flow(resumable=True)
            def main(run):
                run.state["n"] = 0
                filler = os.path.join(run.workspace, "..", "filler")
                fd = os.open(filler, os.O_WRONLY | os.O_CREAT)
                try:
                    while True:  # the disk is full from here
                        os.write(fd, b"x" * 4096)
                except OSError:
                    pass
                os.close(fd)
                folder = os.path.join(run.workspace, ".flowdrop", "runs", run.run_id)
                for n in range(1, 4):
                    run.state["n"] = n               # each kept in the log
                import json
                published = json.loads(Path(folder, "state.json").read_bytes())["fill"]["n"]
                run.state["big"] = "x" * 6000        # no room for its blocks: the log has it
                left = os.path.exists(os.path.join(folder, "state.json.tmp"))
                from flowdrop_tui.core.records.flow_state.state import read_run_states
                saved = read_run_states(Path(folder))["fill"]
                os.unlink(filler)
                run.log("while full", tmp=left, saved=[saved["n"], len(saved["big"])],
                        published=published)
                del run.state["big"]
                run.state["n"] = 10                   # room again: saved
                return "done"
            """,
        )
        cli = CLI(ws)
        done = cli("run", "fill", timeout=120)
        run_id = _only_run(ws)
        evs = events(ws, run_id)
        full = [e["fields"] for e in evs if e.get("message") == "while full"]
        # no room for a new state.json: it stays at the save before the disk filled, and
        # the log keeps every save
        assert full == [{"tmp": False, "saved": [3, 6000], "published": 0}], (evs, done.stderr)
        warnings = [e["message"] for e in evs if e["event"] == "warning"]
        # state.json is replaced at every key set (the seed): when the disk has no room for
        # it, which is said once (the saves are in the log), and its recovery once
        assert len(warnings) == 2, warnings
        assert warnings[0].startswith("state.json not replaced (OSError: [Errno 28]"), warnings
        assert "each save is kept in state.log" in warnings[0], warnings
        assert warnings[1] == "state.json replaced again after earlier failures", warnings
        assert state_of(ws, run_id) == {"fill": {"n": 10}}
        folder = ws / ".flowdrop" / "runs" / run_id
        assert orjson.loads((folder / "state.json").read_bytes()) == {"fill": {"n": 10}}
        assert not (folder / "state.log").exists()
        assert done.returncode == 0, done.stderr
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)


# -- item 8: re-entrant saves ----------------------------------------------------------------------


def test_a_key_set_from_a_signal_handler_mid_save_never_stalls_or_goes_backwards(
    workspace: Path,
) -> None:
    """Item 8: a key set from a signal handler while a save was in flight stalled the run
    on its own write lease (46 s) and lost that save; periodic ones made state.json go
    backwards as seen by a reader. A save that re-enters only marks the state dirty."""
    write_flow(
        workspace,
        "ticks",
        """
        import signal
        from flowdrop_tui import flow

        @flow()
        def main(run):
            def tick(signum, frame):
                run.state["tick"] = run.state.get("tick", 0) + 1

            signal.signal(signal.SIGALRM, tick)
            signal.setitimer(signal.ITIMER_REAL, 0.0005, 0.0005)
            try:
                for n in range(1, 401):
                    run.state["n"] = n
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0, 0)
            run.state["ticks"] = run.state.get("tick", 0)
            return "done"
        """,
    )
    proc = CLI(workspace).start("run", "ticks")
    runs = workspace / ".flowdrop" / "runs"
    run_dir = wait_for(lambda: next((p for p in runs.glob("2*") if p.is_dir()), None))
    seen: list[tuple[int, int]] = []
    problems: list[str] = []
    while proc.poll() is None:
        try:
            raw = (run_dir / "state.json").read_bytes()
        except FileNotFoundError:
            continue
        try:
            state = orjson.loads(raw)["ticks"]
        except (orjson.JSONDecodeError, KeyError, TypeError):
            problems.append(f"unreadable: {raw[:80]!r}")
            continue
        now = (state.get("n", 0), state.get("tick", 0))
        if seen and (now[0] < seen[-1][0] or now[1] < seen[-1][1]):
            problems.append(f"went backwards: {seen[-1]} then {now}")
        seen.append(now)
    _, stderr = proc.communicate(timeout=5)
    assert proc.returncode == 0, stderr
    assert problems == []
    final = state_of(workspace, run_dir.name)["ticks"]
    assert final["n"] == 400 and final["ticks"] == final["tick"] > 0


def test_a_save_that_re_enters_marks_dirty_and_the_outer_save_writes_it(tmp_path: Path) -> None:
    """Item 8, in-process: the nested set is on disk when the outer set returns."""
    from flowdrop_tui.core.records.flow_state import state as state_module

    store = state_module.StateFile(tmp_path / "state.json")
    s = store.state("k")
    real = store.keeper.keep
    nested: list[int] = []

    def keep_and_reenter(data: bytes, **kwargs: Any) -> None:
        if not nested:
            nested.append(1)
            s["from_handler"] = 1  # what a signal handler does mid-save
        real(data, **kwargs)

    store.keeper.keep = keep_and_reenter  # type: ignore[method-assign]
    s["outer"] = 1
    assert state_module.read_run_states(tmp_path) == {"k": {"outer": 1, "from_handler": 1}}
    store.close()
    assert orjson.loads((tmp_path / "state.json").read_bytes()) == {
        "k": {"outer": 1, "from_handler": 1}
    }


# -- item 9: a stopped writer ----------------------------------------------------------------------


def test_readers_never_stall_on_a_writer_stopped_mid_save(workspace: Path, cli: CLI) -> None:
    """Item 9: a writer stopped (SIGSTOP, Ctrl-Z, a debugger) while it held its write lease
    stalled every reader of its state files for the kernel's lease-break time (45 s)."""
    write_flow(
        workspace,
        "busy",
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
    run_id = cli.json("run", "busy", "--detach")["run"]
    run_dir = workspace / ".flowdrop" / "runs" / run_id
    wait_for(lambda: state_of(workspace, run_id).get("busy", {}).get("n", 0) > 20)
    pid = int((run_dir / "live.lock").read_text())
    reader = (
        "import os, sys\n"
        "for name in sorted(os.listdir(sys.argv[1])):\n"
        "    path = os.path.join(sys.argv[1], name)\n"
        "    if os.path.isfile(path):\n"
        "        open(path, 'rb').read()\n"
    )
    try:
        for _ in range(15):
            os.kill(pid, signal.SIGSTOP)
            try:
                subprocess.run([sys.executable, "-c", reader, str(run_dir)], timeout=5, check=True)
                shown = cli("show", run_id, "--json", timeout=5)
                assert shown.returncode == 0, shown.stderr
            finally:
                os.kill(pid, signal.SIGCONT)
            time.sleep(0.01)
    finally:
        os.kill(pid, signal.SIGCONT)
        cli("stop", run_id, "--wait", timeout=30)


# -- item 16 and 18: values ------------------------------------------------------------------------


def test_an_unsaveable_value_is_skipped_each_time_while_other_keys_keep_saving(
    workspace: Path, cli: CLI
) -> None:
    """Item 16: a value whose __str__ raises froze every later save for the rest of the
    run, with one warning, and the run still said completed. That key keeps its last
    good value; every other key keeps saving. Issue 26 item 4: every failed save warned
    (13 identical warnings in 2 rounds); now the first says why, the second that it is
    not said again, and the run's end counts the rest."""
    write_flow(
        workspace,
        "hostile",
        """
        from flowdrop_tui import flow

        class Hostile:
            def __str__(self):
                raise RuntimeError("no text for you")

        @flow(resumable=True)
        def main(run):
            run.state["bad"] = "good at first"
            run.state["bad"] = Hostile()
            for n in range(1, 6):
                run.state["n"] = n
            return "done"
        """,
    )
    done = cli("run", "hostile", "--json", check=0)
    out = orjson.loads(done.stdout)
    run_id = out["run"]
    assert out["status"] == "completed"
    assert state_of(workspace, run_id) == {"hostile": {"bad": "good at first", "n": 5}}
    warnings = [e["message"] for e in events(workspace, run_id) if e["event"] == "warning"]
    about_bad = [w for w in warnings if "'bad'" in w and "no text for you" in w]
    assert len(about_bad) == 2, warnings
    assert "not said again" in about_bad[1], about_bad
    # the set of the bad value, five key sets, and the run's end save: 7 saves left it out
    assert out["state_refused"] == {"hostile['bad']": 7}, out
    ended = next(e for e in events(workspace, run_id) if e["event"] == "ended")
    assert ended["state_refused"] == {"hostile['bad']": 7}
    assert done.stderr.count("no text for you") == 2, done.stderr
    assert "7 saves left out 1 state value" in done.stderr, done.stderr
    shown = cli("show", run_id, check=0).stdout
    assert "hostile['bad']: left out of 7 saves in this run" in shown, shown
    assert cli.json("show", run_id)["state_refused"] == {"hostile['bad']": 7}
    again = cli.json("run", "hostile")  # the next run picks up what was saved
    assert state_of(workspace, again["run"])["hostile"]["n"] == 5


def test_an_unsaveable_value_warns_at_most_twice_over_ten_rounds_and_across_a_resume(
    workspace: Path, cli: CLI
) -> None:
    """Issue 26 item 4 (the held-out check): one unsaveable value set in each of 10 rounds
    warns at most twice in cycle.jsonl, on stderr and in output.log (a detached run), and
    a pause and resume of the same run does not start the warnings over: the count
    goes on."""
    write_flow(
        workspace,
        "hostile",
        """
        from flowdrop_tui import flow

        class Hostile:
            def __str__(self):
                raise RuntimeError("no text for you")

        @flow(resumable=True)
        def main(run):
            for n in run.rounds():
                run.state["bad"] = Hostile()
                run.state["n"] = n
                if n >= 10:
                    return n
        """,
    )
    launched = cli.json("run", "hostile", "--detach", "--max-rounds", "5")
    run_id = launched["run"]
    run_dir = workspace / ".flowdrop" / "runs" / run_id
    wait_for(lambda: any(e["event"] == "paused" for e in events(workspace, run_id)))
    paused = [e for e in events(workspace, run_id) if e["event"] == "paused"][-1]
    first_count = paused["state_refused"]["hostile['bad']"]
    assert first_count >= 10, paused
    resumed = cli("resume", run_id, "--max-rounds", "none", "--yes", check=0)
    assert "no text for you" not in resumed.stderr, resumed.stderr
    info = cli.json("show", run_id)
    assert info["status"] == "completed", info
    warnings = [
        e["message"]
        for e in events(workspace, run_id)
        if e["event"] == "warning" and "'bad'" in e["message"]
    ]
    assert len(warnings) == 2, warnings
    output = (run_dir / "output.log").read_text()
    assert output.count("no text for you") <= 2, output
    assert info["state_refused"]["hostile['bad']"] > first_count >= 10
    assert "left out" in resumed.stderr, resumed.stderr


@pytest.mark.parametrize(
    ("expr", "text", "words"),
    [
        ("float('nan')", "nan", "not a JSON number"),
        ("float('inf')", "inf", "not a JSON number"),
        ("-float('inf')", "-inf", "not a JSON number"),
        ("2**53 + 1", str(2**53 + 1), "beyond 2^53"),
        ("-(2**60)", str(-(2**60)), "beyond 2^53"),
        ("2**70", str(2**70), "beyond 2^53"),
        ("[1.5, float('nan')]", ["1.5", "nan"], "not a JSON number"),
        ("{1: 'a', '1': 'b'}", str({1: "a", "1": "b"}), "collide"),
        ("{'x': {None: 1, 'null': 2}}", {"x": str({None: 1, "null": 2})}, "collide"),
    ],
)
def test_values_json_would_change_are_written_as_text_with_a_warning(
    workspace: Path, cli: CLI, expr: str, text: Any, words: str
) -> None:
    """Item 18 (values): NaN/Inf became null, big integers came back as floats or text,
    int/str key collisions dropped a key — silently. Each is written as its text now,
    with a warning (SPEC §5.3)."""
    write_flow(
        workspace,
        "v",
        f"""
        from flowdrop_tui import flow

        @flow()
        def main(run):
            run.state["v"] = {expr}
            run.state["n"] = 1
            run.state["n"] = 2
        """,
    )
    out = cli.json("run", "v")
    saved = state_of(workspace, out["run"])["v"]
    if isinstance(text, list):
        text = [1.5, "nan"]
    assert saved == {"v": text, "n": 2}
    warnings = [e["message"] for e in events(workspace, out["run"]) if e["event"] == "warning"]
    assert len(warnings) == 1 and words in warnings[0] and "'v'" in warnings[0], warnings


def test_plain_values_are_written_as_they_are_without_warnings(tmp_path: Path) -> None:
    """Item 18: the checks add no warning to values JSON holds exactly (None included)."""
    from flowdrop_tui.core.records.flow_state.state import StateFile

    warnings: list[str] = []
    store = StateFile(tmp_path / "state.json", warnings.append)
    s = store.state("k")
    s.update(none=None, big=2**53, neg=-(2**53), f=1.5, nested={"a": [None, 1, "null"]})
    store.close()
    assert orjson.loads((tmp_path / "state.json").read_bytes()) == {
        "k": {
            "none": None,
            "big": 2**53,
            "neg": -(2**53),
            "f": 1.5,
            "nested": {"a": [None, 1, "null"]},
        }
    }
    assert warnings == []
