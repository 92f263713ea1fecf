"""SPEC §21: a notice a sink does not take is tried again on the schedule ``[notify]
retry`` names, delivered once when a try succeeds, and kept as an ``undelivered``
inbox item after the last; a command sink past its timeout is killed with its whole
process group; a command that exits 0 has delivered, whatever child it left holding
its output. Real processes: the run, the detached sender, the sinks and their children."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import orjson

from tests.conftest import CLI, wait_for, write_flow
from tests.gates.test_inbox import FAILS
from tests.gates.test_notices import configure, received, settled

FLAKY = """
import os, sys
data = sys.stdin.buffer.read()
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_APPEND | os.O_CREAT)
os.write(fd, b"try\\n")
os.close(fd)
if len(open(sys.argv[1], "rb").read().splitlines()) <= int(sys.argv[3]):
    sys.exit("not yet")
fd = os.open(sys.argv[2], os.O_WRONLY | os.O_APPEND | os.O_CREAT)
os.write(fd, data + b"\\n")
"""

HANGS = """
import os, subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
open(sys.argv[1] + ".tmp", "w").write(f"{os.getpid()} {child.pid}")
os.rename(sys.argv[1] + ".tmp", sys.argv[1])
time.sleep(120)
"""

LEAVES_A_CHILD = """
import os, subprocess, sys
data = sys.stdin.buffer.read()
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
open(sys.argv[1], "w").write(str(child.pid))
fd = os.open(sys.argv[2], os.O_WRONLY | os.O_APPEND | os.O_CREAT)
os.write(fd, data + b"\\n")
"""


def command(*argv: str) -> str:
    return orjson.dumps([sys.executable, "-c", *argv]).decode()


def quiet(ws: Path) -> bool:
    """Settled, and no retry waits."""
    retry = ws / ".flowdrop" / "notices" / "retry"
    return settled(ws) and not (retry.is_dir() and any(retry.iterdir()))


def tries(path: Path) -> int:
    return len(path.read_bytes().splitlines()) if path.exists() else 0


def gone(pid: int) -> bool:
    """Exited (a zombie waiting to be reaped counts: it runs nothing)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] == "Z"


def failed_run(cli: CLI, ws: Path) -> str:
    write_flow(ws, "red", FAILS)
    cli("run", "red", check=1)
    return str(cli.json("runs", "red")[0]["run"])


def test_a_sink_that_fails_twice_then_takes_it_gets_the_notice_once(
    cli: CLI, workspace: Path, tmp_path: Path
) -> None:
    """Guards against a failed sink losing the notice for good (only failures.jsonl
    had it), and against a retry sending a notice a sink already took."""
    count, out = tmp_path / "tries", tmp_path / "notices.jsonl"
    configure(
        workspace,
        command=command(FLAKY, str(count), str(out), "2"),
        retry="[0.2, 0.2, 0.2, 0.2]",
    )
    run_id = failed_run(cli, workspace)
    wait_for(lambda: received(out), 60)
    wait_for(lambda: quiet(workspace), 60)
    assert [n["id"] for n in received(out)] == [f"{run_id}/failed-1"]
    assert tries(count) == 3
    failures = workspace / ".flowdrop" / "notices" / "failures.jsonl"
    lines = [orjson.loads(line) for line in failures.read_bytes().splitlines()]
    assert [(f["id"], f["try"]) for f in lines] == [
        (f"{run_id}/failed-1", 1),
        (f"{run_id}/failed-1", 2),
    ]
    assert [i["kind"] for i in cli.json("inbox")] == ["failed"]


def test_a_sink_that_always_fails_leaves_an_undelivered_item_in_the_inbox(
    cli: CLI, workspace: Path, tmp_path: Path
) -> None:
    """Guards against a notice no sink took vanishing: after the schedule's last try it
    is an inbox item (kind ``undelivered``) a person sees and dismisses."""
    count, out = tmp_path / "tries", tmp_path / "notices.jsonl"
    configure(workspace, command=command(FLAKY, str(count), str(out), "99"), retry="[0.1, 0.1]")
    run_id = failed_run(cli, workspace)
    undelivered = wait_for(lambda: [i for i in cli.json("inbox") if i["kind"] == "undelivered"], 60)
    wait_for(lambda: quiet(workspace), 60)
    assert tries(count) == 3  # the first try and the schedule's two
    assert not received(out)
    [item] = undelivered
    assert item["notice"] == f"{run_id}/failed-1" and item["sink"] == "command"
    assert item["run"] == run_id and item["flow"] == "red" and "not yet" in item["message"]
    assert item["command"] == f"flowdrop-tui inbox --dismiss {item['id']}"
    cli("inbox", "--dismiss", item["id"], check=0)
    assert [i["kind"] for i in cli.json("inbox")] == ["failed"]
    assert tries(count) == 3  # the inbox sends no notice about a notice


def test_a_command_past_its_timeout_is_killed_with_its_group(
    cli: CLI, workspace: Path, tmp_path: Path
) -> None:
    """Guards against a hanging command (and what it started) left running after its
    timeout: only the command itself was killed, its child went on."""
    pids = tmp_path / "pids"
    configure(workspace, command=command(HANGS, str(pids)), timeout="1", retry="[]")
    failed_run(cli, workspace)
    leader, child = (
        int(p) for p in wait_for(lambda: pids.exists() and pids.read_text(), 60).split()
    )
    try:
        wait_for(lambda: gone(leader) and gone(child), 60)
        wait_for(lambda: quiet(workspace), 60)
        [item] = [i for i in cli.json("inbox") if i["kind"] == "undelivered"]
        assert "did not exit in 1 s" in item["message"]
    finally:
        for pid in (leader, child):
            if not gone(pid):
                os.kill(pid, signal.SIGKILL)


def test_a_command_that_exits_0_leaving_a_child_on_its_output_has_delivered(
    cli: CLI, workspace: Path, tmp_path: Path
) -> None:
    """Guards against a delivered notice counted as failed (and tried again) because a
    child the command left running still held its stderr pipe open."""
    child_pid, out = tmp_path / "child.pid", tmp_path / "notices.jsonl"
    configure(workspace, command=command(LEAVES_A_CHILD, str(child_pid), str(out)))
    run_id = failed_run(cli, workspace)
    child = int(wait_for(lambda: child_pid.exists() and child_pid.read_text(), 60))
    try:
        wait_for(lambda: received(out), 60)
        wait_for(lambda: quiet(workspace), 60)
        assert not gone(child)  # still holding the output the sender no longer waits on
        assert [n["id"] for n in received(out)] == [f"{run_id}/failed-1"]
        assert not (workspace / ".flowdrop" / "notices" / "failures.jsonl").exists()
        assert [i["kind"] for i in cli.json("inbox")] == ["failed"]
    finally:
        if not gone(child):
            os.kill(child, signal.SIGKILL)
