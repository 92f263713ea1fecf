"""`flowdrop-tui worker`'s bad inputs: named, exit 2, no traceback."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from tests.remote.cluster import Cluster, wait_for


def worker(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLOWDROP_")}
    return subprocess.run(
        [sys.executable, "-m", "flowdrop_tui", "--workspace", str(tmp_path), "worker", *args],
        capture_output=True,
        text=True,
        env={**env, "HOME": str(tmp_path)},
        timeout=60,
    )


@pytest.mark.parametrize(
    ("args", "said"),
    [
        ([], "--temporal"),
        (["--temporal", "127.0.0.1:1"], "--postgres"),
        (["--temporal", "a:1", "--postgres", "postgresql://x@h/db", "--id", "a/b"], "worker id"),
        (["--temporal", "a:1", "--postgres", "postgresql://x@h/db", "--id", ""], "worker id"),
        (["--max-runs", "0"], "number of runs"),
        (["--temporal", "grpc://a:1", "--postgres", "postgresql://x@h/db"], "(--temporal)"),
        (["--temporal", "a:1", "--postgres", "h:5432"], "(--postgres)"),
    ],
)
def test_a_worker_without_what_it_needs_is_refused_naming_it(
    tmp_path: Path, args: list[str], said: str
) -> None:
    """Guards against a worker that starts half configured (or with an id that cannot
    name a task queue) and fails later, or fails with a traceback."""
    done = worker(tmp_path, *args)
    assert done.returncode == 2, done.stderr
    assert said in done.stderr and "Traceback" not in done.stderr


def test_a_worker_whose_temporal_server_is_not_there_says_so(tmp_path: Path) -> None:
    """Guards against a worker hanging or printing a traceback when Temporal is down."""
    done = worker(
        tmp_path, "--temporal", "127.0.0.1:9", "--postgres", "postgresql://x@127.0.0.1:9/p"
    )
    assert done.returncode == 4 and "Traceback" not in done.stderr  # TEMPORAL_UNREACHABLE
    assert "cannot reach the Temporal server at 127.0.0.1:9: connection refused" in done.stderr


def test_two_workers_never_share_a_home(tmp_path: Path) -> None:
    """Guards against a second worker sweeping (or mixing up) the first one's worktrees."""
    from flowdrop_tui.core.remote.daemon.worker import hold_home

    home = tmp_path / "home"
    home.mkdir()
    hold_home(home, "first")
    done = worker(
        tmp_path,
        "--home",
        str(home),
        "--temporal",
        "127.0.0.1:9",
        "--postgres",
        "postgresql://x@127.0.0.1:9/p",
    )
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert f"uses the home {home}" in done.stderr and str(os.getpid()) in done.stderr


def test_worker_json_says_once_it_polls_as_one_json_line(cluster: Cluster) -> None:
    """Issue 26 item 8: `worker --json` exited 2 though every command takes --json. Once it
    polls it prints one JSON line (its id, queues, runs at once, home) on stdout; the
    words stay on stderr."""
    worker = cluster.start_worker("j", max_runs=2, extra=("--json",))
    worker.wait_polling()

    def ready() -> dict[str, object] | None:
        for line in worker.text().splitlines():
            if line.startswith("{"):
                found = orjson.loads(line)
                return found if isinstance(found, dict) else None
        return None

    said = wait_for("the ready line", ready)
    assert said["ready"] is True and said["worker"] == "j" and said["max_runs"] == 2, said
    assert said["task_queue"] == cluster.task_queue and said["pid"] == worker.process.pid
    assert said["own_queue"] and said["home"] == str(worker.home / "flowdrop-worker")
    worker.stop()
    assert worker.process.returncode == 0, worker.text()


def test_worker_json_whose_temporal_server_is_not_there_is_a_json_error(tmp_path: Path) -> None:
    done = worker(
        tmp_path,
        "--json",
        "--temporal",
        "127.0.0.1:9",
        "--postgres",
        "postgresql://x@127.0.0.1:9/p",
    )
    assert done.returncode == 4 and "Traceback" not in done.stderr
    assert orjson.loads(done.stdout)["error"]["code"] == "TEMPORAL_UNREACHABLE"


def test_a_worker_with_temporal_as_a_flag_and_postgres_in_the_environment_runs(
    cluster: Cluster,
) -> None:
    """Issue 38 item 3: `--temporal` as a flag with the URL in FLOWDROP_POSTGRES (as the
    docs advise, keeping the password off the command line) was refused "half
    configured": the environment was checked before the flags were merged."""
    worker = cluster.start_worker("f", postgres_flag=False)
    worker.wait_polling()
    assert "half configured" not in worker.text()
    worker.stop()
    assert worker.process.returncode == 0, worker.text()


def test_a_worker_with_only_postgres_in_the_environment_names_temporal(tmp_path: Path) -> None:
    """The other half missing is still refused, naming the flag (exit 2)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLOWDROP_")}
    done = subprocess.run(
        [sys.executable, "-m", "flowdrop_tui", "--workspace", str(tmp_path), "worker"],
        capture_output=True,
        text=True,
        env={**env, "HOME": str(tmp_path), "FLOWDROP_POSTGRES": "postgresql://x@h/db"},
        timeout=60,
    )
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "--temporal" in done.stderr, done.stderr


def test_a_worker_s_own_lines_say_when(cluster: Cluster) -> None:
    """Issue 38 item 11: a worker's own lines had no time, though its log is read long
    after (next to the SDK's timestamped lines): each now starts with UTC time."""
    worker = cluster.start_worker("t")
    worker.wait_polling()
    worker.stop()
    own = [line for line in worker.text().splitlines() if "worker t" in line]
    assert own, worker.text()
    for line in own:
        assert re.match(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ worker t", line), line
