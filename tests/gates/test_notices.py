"""SPEC §21: notices through ``[notify]`` — exactly once per event across the run and
every viewer, to a command and to a webhook on loopback; a slow or failing sink never
holds a run up. Real processes: the runs, five viewers polling, the sender, the sinks."""

from __future__ import annotations

import contextlib
import http.server
import os
import signal
import subprocess
import sys
import threading
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import orjson
import pytest

from flowdrop_tui.core.control import notify
from flowdrop_tui.core.files import locks
from flowdrop_tui.core.paths import Layout
from tests.conftest import CLI, wait_for, write_flow
from tests.gates.test_ask_answer import ASKS, paused_on_question, released
from tests.gates.test_inbox import FAILS, FOREVER

SINK = """
import os, sys
data = sys.stdin.buffer.read()
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_APPEND | os.O_CREAT)
os.write(fd, data + b"\\n")
"""

VIEWER = """
import sys, time
from pathlib import Path
from flowdrop_tui.core import inbox
from flowdrop_tui.core.paths import Layout
layout, stop = Layout(Path(sys.argv[1])), Path(sys.argv[2])
while not stop.exists():
    inbox.items(layout)
    time.sleep(0.02)
"""


class Hook(http.server.BaseHTTPRequestHandler):
    bodies: ClassVar[list[dict[str, object]]] = []

    def do_POST(self) -> None:
        length = int(self.headers["Content-Length"])
        Hook.bodies.append(orjson.loads(self.rfile.read(length)))
        self.send_response(204)
        self.end_headers()

    def log_message(self, *_: object) -> None:
        pass


@pytest.fixture
def webhook() -> Iterator[str]:
    Hook.bodies = []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Hook)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/hook"
    server.shutdown()


def configure(ws: Path, **lines: str) -> None:
    body = "".join(f"{name} = {value}\n" for name, value in lines.items())
    (ws / ".flowdrop").mkdir(exist_ok=True)
    (ws / ".flowdrop" / "config.toml").write_text(f"[notify]\n{body}")


def received(path: Path) -> list[dict[str, object]]:
    if not path.exists():
        return []
    return [orjson.loads(line) for line in path.read_bytes().splitlines() if line.strip()]


def settled(ws: Path) -> bool:
    """No notice waits in the spool and no sender is delivering."""
    spool = ws / ".flowdrop" / "notices" / "spool"
    lock = ws / ".flowdrop" / "notices" / "deliver.lock"
    return not any(spool.glob("*.json")) and locks.holder_pid(lock) is None


def test_exactly_one_notice_per_event_with_five_viewers_and_the_run(
    cli: CLI, workspace: Path, webhook: str, tmp_path: Path
) -> None:
    out = tmp_path / "notices.jsonl"
    command = orjson.dumps([sys.executable, "-c", SINK, str(out)]).decode()
    configure(workspace, command=command, webhook=f'"{webhook}"', completed="true")
    stop = tmp_path / "stop-viewers"
    viewers = [
        subprocess.Popen([sys.executable, "-c", VIEWER, str(workspace), str(stop)])
        for _ in range(5)
    ]
    try:
        asked = paused_on_question(cli, workspace)
        gate = cli.json("show", asked)["gate"]["id"]
        wait_for(lambda: any(n["kind"] == "gate" for n in received(out)), 30)
        write_flow(workspace, "red", FAILS)
        cli("run", "red", check=1)
        red = str(cli.json("runs", "red")[0]["run"])
        write_flow(workspace, "forever", FOREVER)
        killed = str(cli.json("run", "forever", "--detach")["run"])
        live = workspace / ".flowdrop" / "runs" / killed / "live.lock"
        # `run --detach` answers once the record is made; its child takes the lock a
        # moment later (seconds on a busy machine)
        pid = wait_for(lambda: locks.holder_pid(live), 30)
        os.killpg(pid, signal.SIGKILL)  # a run that died: a viewer sends its notice
        cli("answer", asked, "yes", check=0)
        wait_for(lambda: (cli.json("show", asked)["gate"] or {}).get("question") == "ship 1?")
        gate2 = cli.json("show", asked)["gate"]["id"]
        wait_for(lambda: f"{asked}/gate-{gate2}" in {n["id"] for n in received(out)}, 30)
        cli("answer", asked, "no", check=0)
        wait_for(lambda: cli.json("show", asked)["status"] == "completed")
        expected = {
            f"{asked}/gate-{gate}",
            f"{asked}/gate-{gate2}",
            f"{asked}/completed",
            f"{red}/failed-1",
            f"{killed}/interrupted-1",
        }
        wait_for(lambda: expected <= {n["id"] for n in received(out)}, 30)
        wait_for(lambda: expected <= {n["id"] for n in Hook.bodies}, 30)
    finally:
        stop.write_text("")
        for viewer in viewers:
            viewer.wait(timeout=30)
    wait_for(lambda: settled(workspace), 30)
    for sent in (received(out), Hook.bodies):
        counts = Counter(str(n["id"]) for n in sent)
        assert set(counts) == expected and set(counts.values()) == {1}, counts
        for notice in sent:
            assert {"id", "run", "flow", "kind", "message", "at"} <= set(notice)
    by_id = {n["id"]: n for n in received(out)}
    assert by_id[f"{killed}/interrupted-1"]["flow"] == "forever"
    assert by_id[f"{asked}/gate-{gate}"]["run"] == asked
    assert "ship 0?" in str(by_id[f"{asked}/gate-{gate}"]["message"])
    # the run recorded what it sent; the viewer's notice is in its marker only
    from tests.conftest import events

    sent_by_run = [e["id"] for e in events(workspace, asked) if e["event"] == "notice_sent"]
    assert sorted(sent_by_run) == sorted(i for i in expected if i.startswith(asked))
    assert not any(e["event"] == "notice_sent" for e in events(workspace, killed))
    assert (workspace / ".flowdrop" / "runs" / killed / "notices" / "interrupted-1").is_file()


def test_a_sink_that_hangs_does_not_hold_the_run_up(
    cli: CLI, workspace: Path, tmp_path: Path
) -> None:
    hanging = tmp_path / "hanging.pid"
    sink = f"import os, time; open({str(hanging)!r}, 'w').write(str(os.getpid())); time.sleep(60)"
    configure(workspace, command=orjson.dumps([sys.executable, "-c", sink]).decode(), retry="[]")
    write_flow(workspace, "red", FAILS)
    try:
        cli("run", "red", check=1)  # returned: the notice went to the sender, not waited on
        pid = int(wait_for(lambda: hanging.exists() and hanging.read_text(), 30))
        os.kill(pid, 0)  # the sink still sleeps, and the run is long over
        assert cli.json("runs", "red")[0]["status"] == "failed"
        cli("run", "red", check=1)  # the next run is not held up either
        assert len(cli.json("runs", "red")) == 2
    finally:
        if hanging.exists():
            with contextlib.suppress(ProcessLookupError):  # (its timeout may have come)
                os.kill(int(hanging.read_text()), signal.SIGKILL)
    failures = workspace / ".flowdrop" / "notices" / "failures.jsonl"
    wait_for(lambda: failures.exists(), 30)  # killed: the sender says the sink failed


def test_a_failing_sink_is_recorded_and_a_bad_setting_is_a_warning(
    cli: CLI, workspace: Path
) -> None:
    configure(workspace, command='["false"]', desktop='"yes"', retry="[]")
    write_flow(workspace, "red", FAILS)
    cli("run", "red", check=1)
    failures = workspace / ".flowdrop" / "notices" / "failures.jsonl"
    line = orjson.loads(wait_for(lambda: failures.exists() and failures.read_bytes(), 30))
    assert line["sink"] == "command" and "exited with 1" in line["error"]
    done = cli("inbox", check=0)
    assert "[notify] desktop must be true or false" in done.stderr


def test_the_first_notice_goes_at_once_and_a_burst_behind_it_is_merged(
    cli: CLI, workspace: Path, tmp_path: Path
) -> None:
    """A run's notices that arrive while a delivery is under way (here: the sender's
    lock held by the test) go out as one, its last naming the others."""
    out = tmp_path / "notices.jsonl"
    configure(workspace, command=orjson.dumps([sys.executable, "-c", SINK, str(out)]).decode())
    write_flow(workspace, "asks", ASKS)
    run_id = str(cli.json("run", "asks", "--detach")["run"])
    first = wait_for(lambda: cli.json("show", run_id)["gate"])["id"]
    [alone] = wait_for(lambda: received(out), 30)  # at once, not held for a window
    assert alone["id"] == f"{run_id}/gate-{first}" and "merged" not in alone
    wait_for(lambda: settled(workspace), 30)
    wait_for(lambda: released(workspace, run_id))
    layout = Layout(workspace)
    lock = workspace / ".flowdrop" / "notices" / "deliver.lock"
    locks.acquire(lock)  # a delivery under way: what comes now waits for it
    try:
        cli("resume", run_id, "--detach", check=0)  # asks again: a second notice
        second = wait_for(lambda: (cli.json("show", run_id)["gate"] or {}).get("id") != first)
        assert second
        wait_for(lambda: released(workspace, run_id))
        cli("resume", run_id, "--detach", check=0)  # and a third
        wait_for(lambda: len(list((workspace / ".flowdrop/notices/spool").glob("*.json"))) == 2)
    finally:
        locks.release(lock)
    notify.start_sender(layout)
    wait_for(lambda: len(received(out)) == 2, 30)
    wait_for(lambda: settled(workspace), 30)
    _, burst = received(out)
    assert len(burst["merged"]) == 1 and burst["merged"][0].startswith(f"{run_id}/gate-")
    assert burst["id"] == f"{run_id}/gate-{cli.json('show', run_id)['gate']['id']}"


def test_no_notify_table_sends_nothing_and_claims_nothing(cli: CLI, workspace: Path) -> None:
    write_flow(workspace, "red", FAILS)
    cli("run", "red", check=1)
    assert len(cli.json("inbox")) == 1
    assert not list((workspace / ".flowdrop" / "runs").glob("*/notices"))
