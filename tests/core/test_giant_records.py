"""A week-long loop's giant record (issue 27, item 10; docs/reliability.md, "Giant
records"): the fold cache is written and used, a planted one is ignored and rebuilt, and
no command — the run's own end and pause included — holds the record in memory.

Each command is the real one in a child process; its peak RSS is ``os.wait4``'s
``ru_maxrss``. The bound is far above what a streamed read needs (about 45 MB here) and
far below the record's size (each of these commands had read it whole: 4.8 GB for a
1 GB record). Times are measured in ``bench/giant_record.py``, never asserted here.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson

from tests.conftest import CLI, events, wait_for, write_flow

PEAK_MB = 150  # a child's peak RSS, whatever the record's size
RECORD_MB = 60
HOLDING = """
    import os, time
    from flowdrop_tui import flow

    @flow(resumable=True, stall=None)
    def main(run):
        for r in run.rounds():
            run.state["n"] = r
            run.log("round", n=r)
            while os.path.exists({hold!r}):
                time.sleep(0.05)
            time.sleep(0.02)
"""
MOVED = {
    "head": "35b6eab3dc0f88102973a0ebeecdd76edb68a754",
    "tree": "49e58de240f3778d1ce344e1caae0aba",
    "state": "0" * 32,
    "progress": None,
    "paths": {"flows/loop/flow.py": "e1faa7b14bfb"},
    "changed": ["state"],
    "sessions": [],
    "failure": None,
}


def grow(cycle: Path, megabytes: int, first: int) -> int:
    """Append rounds ``first``… as a fast loop writes them (whole lines, ``O_APPEND``)
    until the record is ``megabytes`` long; the last round's number."""
    fd = os.open(cycle, os.O_WRONLY | os.O_APPEND)
    n = first
    try:
        while os.fstat(fd).st_size < megabytes << 20:
            out = bytearray()
            start = n
            for n in range(start, start + 2000):
                t = "2026-01-01T00:00:00.000Z"
                out += orjson.dumps({"t": t, "event": "round_started", "key": "loop", "round": n})
                out += b"\n" + orjson.dumps(
                    {"t": t, "event": "log", "key": "loop", "message": "round", "fields": {"n": n}}
                )
                out += b"\n" + orjson.dumps(
                    {"t": t, "event": "round_ended", "key": "loop", "round": n}
                    | {"outcome": "ok", "seconds": 0.05, "moved": MOVED}
                )
                out += b"\n"
                if n % 1000 == 0:
                    out += orjson.dumps(
                        {"t": t, "event": "warning", "kind": "state", "message": f"w{n}"}
                    )
                    out += b"\n"
            os.write(fd, out)
            n += 1
    finally:
        os.close(fd)
    return n - 1


# The command is started by a small Python of its own, which reports its peak RSS: a
# child forked straight from this test process would count this process's own memory
# in its ``ru_maxrss`` (Linux carries the parent's high-water mark across fork and exec).
MEASURE = """
import os, subprocess, sys
proc = subprocess.Popen(sys.argv[2:])
_, status, usage = os.wait4(proc.pid, 0)
with open(sys.argv[1], "w") as out:
    out.write(str(usage.ru_maxrss))
sys.exit(os.waitstatus_to_exitcode(status) & 0xFF)
"""


def child(ws: Path, *args: str) -> subprocess.Popen[bytes]:
    peak = ws.parent / f"peak-{os.urandom(4).hex()}"
    proc = subprocess.Popen(
        [sys.executable, "-c", MEASURE, str(peak), sys.executable, "-m", "flowdrop_tui", *args],
        cwd=ws,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    proc.peak_file = peak  # type: ignore[attr-defined]
    return proc


def finish(proc: subprocess.Popen[bytes]) -> tuple[int, float, bytes]:
    """Wait for ``proc``: (exit status, the command's peak RSS in MB, its stdout)."""
    out, err = proc.communicate()  # (a big answer must not block the child on its pipe)
    assert proc.returncode in (0, 130), (proc.args, proc.returncode, err[-2000:])
    peak: Path = proc.peak_file  # type: ignore[attr-defined]
    return proc.returncode, int(peak.read_text()) / 1024, out


def measured(ws: Path, *args: str) -> tuple[float, Any]:
    """A command's peak RSS in MB and its ``--json`` answer (or ``None``)."""
    _, peak, out = finish(child(ws, *args))
    return peak, orjson.loads(out) if "--json" in args else None


def cache_of(ws: Path, run_id: str) -> Path:
    return ws / ".flowdrop" / "cache" / "folds" / f"{run_id}.json"


def test_no_command_holds_a_giant_record_in_memory(
    workspace: Path, cli: CLI, tmp_path: Path
) -> None:
    """Guards against the run's end and pause, `stop` of a paused run, `reindex`, `show`,
    `plan` and a pick-up reading a record whole (1 GB: 4.8 GB at the run's end), and a
    live run that never kept its fold: its end re-read the whole record."""
    hold = tmp_path / "hold"
    hold.write_text("")
    write_flow(workspace, "loop", HOLDING.format(hold=str(hold)))
    running = child(workspace, "run", "loop")
    run_id = wait_for(lambda: [p.name for p in (workspace / ".flowdrop" / "runs").glob("2*")])[0]
    wait_for(lambda: any(e["event"] == "round_started" for e in events(workspace, run_id)))
    cycle = workspace / ".flowdrop" / "runs" / run_id / "cycle.jsonl"
    last = grow(cycle, RECORD_MB, 2)
    hold.unlink()  # rounds go on: before each, the run folds what was appended
    cache = cache_of(workspace, run_id)
    wait_for(lambda: cache.exists(), timeout=120)
    kept = orjson.loads(cache.read_bytes())
    assert kept["offset"] > RECORD_MB << 20  # the live run keeps its own fold warm
    cli("pause", run_id, check=0)
    _, peak, _ = finish(running)  # its pause folds the record (notices): from the cache
    assert peak < PEAK_MB, f"the run's pause: {peak:.0f} MB"
    peak, shown = measured(workspace, "show", run_id, "--json")
    assert shown["status"] == "paused" and shown["last_round"] == last
    assert peak < PEAK_MB, f"show: {peak:.0f} MB"
    peak, _ = measured(workspace, "stop", run_id)  # closes the paused run itself
    assert peak < PEAK_MB, f"stop of a paused run: {peak:.0f} MB"
    assert cli.json("show", run_id)["status"] == "cancelled"
    for args in (("reindex",), ("plan", "loop", "--json"), ("runs", "loop", "--json")):
        os.unlink(cache)  # cold: the whole record read, a chunk at a time
        peak, _ = measured(workspace, *args)
        assert peak < PEAK_MB, f"{args}: {peak:.0f} MB"
    hold.write_text("")
    picking = child(workspace, "run", "loop")  # a pick-up from it, to its first round
    newer = wait_for(
        lambda: sorted(p.name for p in (workspace / ".flowdrop" / "runs").glob("2*"))[1:]
    )
    wait_for(lambda: any(e["event"] == "round_started" for e in events(workspace, newer[0])))
    cli("stop", newer[0], check=0)
    hold.unlink()
    _, peak, _ = finish(picking)
    assert peak < PEAK_MB, f"a pick-up: {peak:.0f} MB"
    assert cli.json("show", newer[0])["status"] == "cancelled"
    assert cli.json("show", newer[0])["first_round"] > last


def dead_run(workspace: Path, cli: CLI, tmp_path: Path) -> tuple[str, int]:
    """A run that ended, whose record was grown to 3 MB (over the cache's 1 MiB)."""
    hold = tmp_path / "hold"
    write_flow(workspace, "loop", HOLDING.format(hold=str(hold)))
    hold.write_text("")
    running = child(workspace, "run", "loop")
    run_id = wait_for(lambda: [p.name for p in (workspace / ".flowdrop" / "runs").glob("2*")])[0]
    wait_for(lambda: any(e["event"] == "round_started" for e in events(workspace, run_id)))
    cli("stop", run_id, check=0)
    # grown while its round holds: the run's end then folds it (and keeps its fold)
    last = grow(workspace / ".flowdrop" / "runs" / run_id / "cycle.jsonl", 3, 2)
    hold.unlink()
    finish(running)
    return run_id, last


def test_the_fold_cache_is_written_by_one_listing_and_used_by_the_next(
    workspace: Path, cli: CLI, tmp_path: Path
) -> None:
    """Guards against the fold cache never being written (a dataclass in the fold made
    every save raise a TypeError, swallowed): each listing re-read the whole record."""
    run_id, last = dead_run(workspace, cli, tmp_path)
    cache = cache_of(workspace, run_id)
    cache.unlink()
    rows = cli.json("runs", "loop")
    assert rows[0]["last_round"] == last
    kept = orjson.loads(cache.read_bytes())  # one listing wrote it…
    size = (workspace / ".flowdrop" / "runs" / run_id / "cycle.jsonl").stat().st_size
    assert kept["offset"] == size and kept["info"]["last_round"] == last
    kept["info"]["last_round"] = last + 1000  # …and the next reads it, not the record
    cache.write_bytes(orjson.dumps(kept))
    assert cli.json("runs", "loop")[0]["last_round"] == last + 1000
    assert cli.json("show", run_id)["last_round"] == last + 1000


def test_a_planted_fold_cache_is_ignored_and_rebuilt(
    workspace: Path, cli: CLI, tmp_path: Path
) -> None:
    """Guards against a FIFO, a link, junk or another version in place of a fold cache
    hanging a listing or being believed: each is ignored, the record folded, the cache
    written again as a regular file."""
    run_id, last = dead_run(workspace, cli, tmp_path)
    cache = cache_of(workspace, run_id)
    good = orjson.loads(cache.read_bytes())
    wrong = {**good, "info": {**good["info"], "last_round": 1}}
    elsewhere = tmp_path / "elsewhere.json"
    elsewhere.write_bytes(orjson.dumps(wrong))

    def fifo() -> None:
        os.mkfifo(cache)

    def link() -> None:
        cache.symlink_to(elsewhere)  # a believable fold, but through a link: never read

    def junk() -> None:
        cache.write_bytes(b"\x00not json" * 100)

    def version() -> None:
        cache.write_bytes(orjson.dumps({**wrong, "v": good["v"] - 1}))

    def folder() -> None:
        cache.mkdir()

    for plant in (fifo, link, junk, version, folder):
        cache.unlink()
        plant()
        done = cli("runs", "loop", "--json", timeout=60, check=0)  # never hangs
        assert orjson.loads(done.stdout)[0]["last_round"] == last, plant.__name__
        assert cli.json("show", run_id)["last_round"] == last, plant.__name__
        if plant is not folder:
            assert cache.is_file() and not cache.is_symlink(), plant.__name__
            assert orjson.loads(cache.read_bytes())["info"]["last_round"] == last
        else:
            cache.rmdir()
            cli.json("runs", "loop")
    assert orjson.loads(elsewhere.read_bytes()) == wrong  # never written through the link


def test_following_a_giant_record_starts_from_its_cached_fold_and_last_events(
    workspace: Path, cli: CLI, tmp_path: Path
) -> None:
    """Guards against the UI's run pane folding a week-long record from its start when
    it opens the run: it takes up the cached fold and reads the last events from the end,
    and what it shows is what the whole record says."""
    from flowdrop_tui.core.paths import Layout
    from flowdrop_tui.core.records.run_record.follow import RunFollower

    run_id, last = dead_run(workspace, cli, tmp_path)
    every = events(workspace, run_id)
    follower = RunFollower(Layout(workspace), run_id, keep=50, output=False)
    first = follower.poll(history=True)
    assert first.events == every[-50:]
    assert first.dropped == len(every) - 50 == first.info.events - 50
    assert first.info.last_round == last and str(first.info.status) == "cancelled"
    assert follower._tail.offset == orjson.loads(cache_of(workspace, run_id).read_bytes())["offset"]
    cycle = workspace / ".flowdrop" / "runs" / run_id / "cycle.jsonl"
    with cycle.open("ab") as handle:  # (a hand-written line after the end: read, not folded twice)
        handle.write(
            orjson.dumps({"t": "2026-01-02T00:00:00.000Z", "event": "warning", "message": "x"})
            + b"\n"
        )
    later = follower.poll()
    assert [e["event"] for e in later.events] == ["warning"]
    assert later.info.events == len(every) + 1 and later.info.warnings[-1] == "x"


def _one_by_one(raw: bytes) -> list[dict[str, Any]]:
    found = []
    for line in raw.split(b"\n"):
        try:
            item = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue
        if isinstance(item, dict) and isinstance(item.get("event"), str):
            found.append(item)
    return found


def test_a_batch_of_lines_parsed_at_once_reads_exactly_what_lines_one_by_one_read() -> None:
    """Guards against the batch parse (one JSON array per chunk, for a giant record's cold
    fold) letting junk through: a line of two objects, an empty line, a torn last line,
    a value that is not an event are each read as a parse line by line reads them."""
    import random

    from flowdrop_tui.core.records.log.event_lines import parse_lines

    pieces = [
        b'{"t":"x","event":"a","n":1}',
        b'{"event":"b"},{"event":"c"}',
        b"",
        b"   ",
        b'{"event":"d"',
        b"[1,2]",
        b"3",
        b'"event"',
        b'{"event":5}',
        b'{"event":"e"}\r',
        b"\x00junk",
        b'{"event":"f","deep":{"event":"g"}}',
    ]
    rng = random.Random(27)
    for _ in range(3000):
        raw = b"\n".join(rng.choice(pieces) for _ in range(rng.randint(0, 6)))
        raw += rng.choice([b"", b"\n", b"\n\n"])
        assert parse_lines(raw) == _one_by_one(raw), raw
