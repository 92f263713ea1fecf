"""What a flow printed (SPEC §15; docs/decisions.md,
"What a run printed"): ``logs RUN [-f]``, ``show``'s last
lines, and the reader under both, against real runs and real files."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from flowdrop_tui.core.errors import OutputUnreadableError
from flowdrop_tui.core.records.log.output_log import MAX_LINE, OutputTail, tail_lines
from tests.conftest import CLI, events, paused_mid_run, wait_for, write_flow

FAILING = """
    from flowdrop_tui import flow

    @flow()
    def main(run):
        for item in run.rounds(["a", "b", "c"]):
            print("working on", item)
        raise ValueError("the flow broke on purpose")
"""

# Prints "line N" each time the file "next" appears; ends when "finish" appears.
PRINTER = """
    import os, time
    from flowdrop_tui import flow

    @flow()
    def main(run):
        n = 0
        while not os.path.exists("finish"):
            if os.path.exists("next"):
                os.remove("next")
                n += 1
                print(f"line {n}", flush=True)
            time.sleep(0.02)
        print("bye", end="", flush=True)
"""

CHATTY = """
    from flowdrop_tui import flow

    @flow()
    def main(run):
        for n in range(1, 51):
            print(f"line {n}")
"""

BATCH = """
    import os, time
    from flowdrop_tui import flow

    @flow()
    def main(run):
        for item in run.rounds(["a", "b", "c"]):
            print("item", item, flush=True)
            while os.path.exists("hold"):
                time.sleep(0.02)
"""


def output_of(ws: Path, run_id: str) -> Path:
    return ws / ".flowdrop" / "runs" / run_id / "output.log"


def finished(cli: CLI, ws: Path, body: str, name: str = "f") -> str:
    write_flow(ws, name, body)
    run_id = str(cli.json("run", name, "--detach")["run"])
    wait_for(lambda: cli.json("show", run_id)["status"] not in ("pending", "running"))
    return run_id


def follow(cli: CLI, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "flowdrop_tui", "logs", *args],
        cwd=cli.ws,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


# -- logs RUN ----------------------------------------------------------------------------------


def test_logs_prints_what_the_flow_printed_traceback_included(workspace: Path, cli: CLI) -> None:
    """A failed run's traceback was only in output.log, which no command showed."""
    run_id = finished(cli, workspace, FAILING)
    done = cli("logs", run_id, check=0)
    assert done.stdout == output_of(workspace, run_id).read_text()
    lines = done.stdout.splitlines()
    assert lines[:3] == ["working on a", "working on b", "working on c"]
    assert "Traceback (most recent call last):" in lines
    assert lines[-1] == "ValueError: the flow broke on purpose"


def test_logs_json_and_last_lines(workspace: Path, cli: CLI) -> None:
    run_id = finished(cli, workspace, CHATTY)
    answer = cli.json("logs", run_id)
    assert answer["run"] == run_id and answer["status"] == "completed"
    assert answer["lines"] == [f"line {n}" for n in range(1, 51)]
    assert answer["truncated"] is False
    assert answer["path"] == str(output_of(workspace, run_id))
    last = cli.json("logs", run_id, "-n", "3")
    assert last["lines"] == ["line 48", "line 49", "line 50"] and last["truncated"] is True
    assert cli("logs", run_id, "--lines", "2", check=0).stdout == "line 49\nline 50\n"
    assert cli.json("logs", run_id, "-n", "500")["lines"] == answer["lines"]


def test_logs_json_pages_with_limit_and_after(workspace: Path, cli: CLI) -> None:
    """Issue 26 item 8: `logs --json` returned 202,000 lines at once. It answers in pages
    (`--limit`, `--after` the page before's `next_after`) and the text form prints a page
    when asked for one."""
    run_id = finished(cli, workspace, CHATTY)
    first = cli.json("logs", run_id, "--limit", "20")
    assert first["lines"] == [f"line {n}" for n in range(1, 21)]
    assert first["first_line"] == 1 and first["more"] is True and first["next_after"] == 20
    assert first["truncated"] is True
    second = cli.json("logs", run_id, "--limit", "20", "--after", str(first["next_after"]))
    assert second["lines"] == [f"line {n}" for n in range(21, 41)] and second["first_line"] == 21
    last = cli.json("logs", run_id, "--limit", "20", "--after", str(second["next_after"]))
    assert last["lines"] == [f"line {n}" for n in range(41, 51)]
    assert last["more"] is False and last["next_after"] is None
    past = cli.json("logs", run_id, "--after", "500")
    assert past["lines"] == [] and past["more"] is False
    text = cli("logs", run_id, "--after", "45", check=0)
    assert text.stdout == "".join(f"line {n}\n" for n in range(46, 51))
    paged = cli("logs", run_id, "--limit", "2", check=0)
    assert paged.stdout == "line 1\nline 2\n" and "--after 2" in paged.stderr


def test_logs_json_never_answers_a_huge_log_at_once(workspace: Path, cli: CLI) -> None:
    """Without --limit, `logs --json` gives the first page (1000 lines) and says where the
    next begins; the text form still prints everything (SPEC §15)."""
    run_id = finished(
        cli,
        workspace,
        """
        from flowdrop_tui import flow

        @flow()
        def main(run):
            for n in range(1, 2501):
                print(f"line {n}")
        """,
    )
    answer = cli.json("logs", run_id)
    assert len(answer["lines"]) == 1000 and answer["lines"][-1] == "line 1000"
    assert answer["more"] is True and answer["next_after"] == 1000
    assert cli("logs", run_id, check=0).stdout.count("\n") == 2500


def test_logs_follows_a_live_run_and_exits_when_it_ends(workspace: Path, cli: CLI) -> None:
    """``-f`` prints each line as the run prints it, then exits once the run has ended,
    with an unfinished last line printed too."""
    write_flow(workspace, "printer", PRINTER)
    run_id = str(cli.json("run", "printer", "--detach")["run"])
    follower = follow(cli, run_id, "-f")
    try:
        assert follower.stdout is not None
        for n in (1, 2, 3):
            (workspace / "next").write_text("")
            assert follower.stdout.readline() == f"line {n}\n"  # while the run is live
        assert follower.poll() is None
        (workspace / "finish").write_text("")
        rest, err = follower.communicate(timeout=30)
    finally:
        if follower.poll() is None:
            follower.kill()
    assert follower.returncode == 0
    assert rest == "bye\n"
    assert err.strip() == f"run {run_id}: completed"


def test_logs_follow_json_is_json_lines_then_the_status(workspace: Path, cli: CLI) -> None:
    write_flow(workspace, "printer", PRINTER)
    run_id = str(cli.json("run", "printer", "--detach")["run"])
    follower = follow(cli, run_id, "-f", "--json")
    try:
        assert follower.stdout is not None
        (workspace / "next").write_text("")
        assert orjson.loads(follower.stdout.readline()) == {"line": "line 1"}
        (workspace / "finish").write_text("")
        rest, _ = follower.communicate(timeout=30)
    finally:
        if follower.poll() is None:
            follower.kill()
    objects = [orjson.loads(line) for line in rest.splitlines()]
    assert objects == [{"line": "bye"}, {"run": run_id, "status": "completed"}]


def test_logs_follow_of_an_ended_run_prints_it_and_exits(workspace: Path, cli: CLI) -> None:
    run_id = finished(cli, workspace, FAILING)
    done = cli("logs", run_id, "-f", "-n", "1", check=0)
    assert done.stdout == "ValueError: the flow broke on purpose\n"
    assert done.stderr.strip() == f"run {run_id}: failed"


def test_logs_follow_stops_at_a_pause(workspace: Path, cli: CLI) -> None:
    """A paused run prints nothing until it is resumed: following it ends there, saying so."""
    run_id = paused_mid_run(workspace, cli, "batch", BATCH)
    done = cli("logs", run_id, "-f", check=0)
    assert done.stdout.startswith("item a\n")
    assert done.stderr.strip() == f"run {run_id}: paused"


def test_logs_follow_of_a_killed_run_exits_interrupted(workspace: Path, cli: CLI) -> None:
    write_flow(workspace, "printer", PRINTER)
    run_id = str(cli.json("run", "printer", "--detach")["run"])
    follower = follow(cli, run_id, "-f")
    try:
        assert follower.stdout is not None
        (workspace / "next").write_text("")
        assert follower.stdout.readline() == "line 1\n"
        wait_for(lambda: any(e["event"] == "started" for e in events(workspace, run_id)))
        os.killpg(cli.json("show", run_id)["pid"], signal.SIGKILL)
        _, err = follower.communicate(timeout=30)
    finally:
        if follower.poll() is None:
            follower.kill()
    assert follower.returncode == 0 and err.strip() == f"run {run_id}: interrupted"


@pytest.mark.parametrize(
    ("args", "code"),
    [
        (["20990101T000000.000Z-abcdef"], "NOT_FOUND"),
        (["../../etc"], "INVALID_NAME"),
        (["RUN", "-n", "0"], "USAGE"),
        (["RUN", "-n", "-3"], "USAGE"),
        (["RUN", "-n", "many"], "USAGE"),
        (["RUN", "--limit", "0"], "USAGE"),
        (["RUN", "--after", "-1"], "USAGE"),
        (["RUN", "--after", "x"], "USAGE"),
        (["RUN", "-n", "3", "--after", "2"], "USAGE"),
        (["RUN", "-f", "--limit", "5"], "USAGE"),
        (["RUN", "-f", "--after", "5"], "USAGE"),
    ],
)
def test_logs_bad_input_is_exit_2_naming_it(
    workspace: Path, cli: CLI, args: list[str], code: str
) -> None:
    run_id = finished(cli, workspace, CHATTY)
    args = [run_id if arg == "RUN" else arg for arg in args]
    done = cli("logs", *args, "--json", check=2)
    assert orjson.loads(done.stdout)["error"]["code"] == code
    assert "Traceback" not in done.stderr


def test_a_link_in_place_of_output_log_is_never_followed(
    workspace: Path, cli: CLI, tmp_path: Path
) -> None:
    run_id = finished(cli, workspace, CHATTY)
    secret = tmp_path / "secret"
    secret.write_text("not the run's output\n")
    output_of(workspace, run_id).unlink()
    output_of(workspace, run_id).symlink_to(secret)
    done = cli("logs", run_id, "--json", check=3)
    error = orjson.loads(done.stdout)["error"]
    assert error["code"] == "OUTPUT_UNREADABLE" and "is a link" in error["message"]
    shown = cli.json("show", run_id)  # show still shows the run, and says why
    assert shown["output_tail"] == [] and "is a link" in shown["output_error"]
    assert "not the run's output" not in cli("show", run_id, check=0).stdout


def test_a_fifo_in_place_of_output_log_never_blocks(workspace: Path, cli: CLI) -> None:
    run_id = finished(cli, workspace, CHATTY)
    output_of(workspace, run_id).unlink()
    os.mkfifo(output_of(workspace, run_id))
    done = cli("logs", run_id, timeout=20)
    assert done.returncode == 3 and "not a regular file" in done.stderr


def test_a_run_without_output_log_has_printed_nothing(workspace: Path, cli: CLI) -> None:
    run_id = finished(cli, workspace, CHATTY)
    output_of(workspace, run_id).unlink()
    assert cli("logs", run_id, check=0).stdout == ""
    assert cli.json("logs", run_id)["lines"] == []
    assert cli.json("show", run_id)["output_tail"] == []
    assert "output          nothing printed" in cli("show", run_id, check=0).stdout


# -- show ----------------------------------------------------------------------------------------


def test_show_gives_the_last_lines_printed(workspace: Path, cli: CLI) -> None:
    """``show`` did not reveal output.log at all."""
    run_id = finished(cli, workspace, FAILING)
    shown = cli.json("show", run_id)
    assert shown["output_tail"][-1] == "ValueError: the flow broke on purpose"
    assert shown["output_tail"][0] == "working on a" and shown["output_more"] is False
    assert shown["output_error"] is None
    text = cli("show", run_id, check=0).stdout
    assert "output          what the flow printed (output.log)" in text
    assert "\n  ValueError: the flow broke on purpose" in text
    chatty = finished(cli, workspace, CHATTY, "chatty")
    shown = cli.json("show", chatty)
    assert shown["output_tail"] == [f"line {n}" for n in range(31, 51)]
    assert shown["output_more"] is True
    text = cli("show", chatty, check=0).stdout
    assert f"last 20 lines of output.log; all of it: flowdrop-tui logs {chatty}" in text


# -- the reader -----------------------------------------------------------------------------------


def test_the_reader_gives_whole_lines_once_and_the_unfinished_one_at_the_end(
    tmp_path: Path,
) -> None:
    path = tmp_path / "output.log"
    tail = OutputTail(path)
    assert tail.read().lines == []  # not there yet
    path.write_bytes(b"one\r\ntw")
    assert tail.read().lines == ["one"]
    with open(path, "ab") as handle:
        handle.write(b"o\n\xff\xfe bytes\nthree")
    assert tail.read().lines == ["two", "\ufffd\ufffd bytes"]
    assert tail.read().lines == []
    assert tail.read(final=True).lines == ["three"]
    path.write_bytes(b"new\n")  # cut short: read again from its start
    read = tail.read()
    assert read.restarted and read.lines == ["new"]


def test_the_reader_cuts_a_line_without_end_and_reads_in_chunks(tmp_path: Path) -> None:
    path = tmp_path / "output.log"
    path.write_bytes(b"x" * (MAX_LINE + 10) + b"\nshort\n")
    tail = OutputTail(path)
    first = tail.read(limit=MAX_LINE)
    assert first.more and first.lines == ["x" * MAX_LINE]
    assert tail.read_all().lines == ["x" * 10, "short"]


@pytest.mark.parametrize("end", [b"", b"\n"])
def test_tail_lines_counts_lines_with_or_without_a_last_newline(tmp_path: Path, end: bytes) -> None:
    path = tmp_path / "output.log"
    path.write_bytes(b"\n".join(f"l{n}".encode() for n in range(1, 100_001)) + end)
    assert tail_lines(path, 3) == (["l99998", "l99999", "l100000"], True)
    assert tail_lines(path, 1) == (["l100000"], True)
    path.write_bytes(b"a\nb" + end)
    assert tail_lines(path, 5) == (["a", "b"], False)
    path.write_bytes(b"")
    assert tail_lines(path, 5) == ([], False)


def test_tail_lines_of_one_enormous_line_reads_only_the_end(tmp_path: Path) -> None:
    path = tmp_path / "output.log"
    path.write_bytes(b"y" * (4 << 20))
    lines, more = tail_lines(path, 20)
    assert more and sum(len(line) for line in lines) <= 256 * 1024


def test_tail_lines_refuses_a_directory(tmp_path: Path) -> None:
    (tmp_path / "output.log").mkdir()
    with pytest.raises(OutputUnreadableError):
        tail_lines(tmp_path / "output.log")
