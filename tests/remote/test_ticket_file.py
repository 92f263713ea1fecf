"""A run child's ticket in a file (``FLOWDROP_REMOTE_RUN=file:PATH``, 0600, read once
and removed), and the environment a worker gives a flow: the worker's, less its own
settings and secrets. A real run child writing through to the real PostgreSQL."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from flowdrop_tui.core.remote.daemon.write_through import ENV_VAR, TICKET_FILE, flow_env
from flowdrop_tui.core.remote.postgres.store import PostgresStore
from tests.conftest import write_flow
from tests.remote.test_mirror import assert_mirrored, only_run, ticket_for

# Saves what its environment says of the ticket, and whether a subprocess sees it.
SEES = """
import os, subprocess
from flowdrop_tui import flow

@flow(resumable=True)
def main(run):
    for r in run.rounds(range(1)):
        run.state["mine"] = os.environ.get("FLOWDROP_REMOTE_RUN")
        seen = subprocess.run(["cat", "/proc/self/environ"], capture_output=True).stdout
        run.state["inherited"] = b"FLOWDROP_REMOTE_RUN" in seen
"""


def run_cli(ws: Path, value: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != ENV_VAR}
    return subprocess.run(
        [sys.executable, "-m", "flowdrop_tui", "run", "sees"],
        cwd=ws,
        env={**env, ENV_VAR: value},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_a_ticket_handed_over_in_a_file_is_read_once_and_removed(
    workspace: Path, pg_store: PostgresStore, tmp_path: Path
) -> None:
    """Guards the worker's way to give a run child its ticket: the child writes through
    (the record in PostgreSQL), the file is gone, and neither the flow nor what it
    starts has the variable."""
    write_flow(workspace, "sees", SEES)
    folder = tmp_path / "tickets"
    given = ticket_for(pg_store, "sees").hand_over(folder)
    path = Path(given[ENV_VAR].removeprefix(TICKET_FILE))
    assert oct(path.stat().st_mode & 0o777) == "0o600"
    assert oct(folder.stat().st_mode & 0o777) == "0o700"
    done = run_cli(workspace, given[ENV_VAR])
    assert done.returncode == 0, done.stderr
    assert not path.exists()
    run_dir = only_run(workspace)
    assert_mirrored(pg_store, run_dir)
    state = orjson.loads((run_dir / "state.json").read_bytes())
    assert state["sees"] == {"mine": None, "inherited": False}


@pytest.mark.parametrize("bad", ["missing", "readable", "symlink"])
def test_a_bad_ticket_file_is_refused_before_anything_runs(
    workspace: Path, pg_store: PostgresStore, tmp_path: Path, bad: str
) -> None:
    write_flow(workspace, "sees", SEES)
    given = ticket_for(pg_store, "sees").hand_over(tmp_path / "tickets")
    path = Path(given[ENV_VAR].removeprefix(TICKET_FILE))
    words = "only this user can read"
    if bad == "missing":
        path.unlink()
        words = "cannot read the ticket file"
    elif bad == "readable":
        path.chmod(0o644)
    else:
        link = tmp_path / "link.json"
        link.symlink_to(path)
        path = link
        words = "cannot read the ticket file"
    done = run_cli(workspace, f"{TICKET_FILE}{path}")
    assert done.returncode == 2, done.stderr
    assert words in done.stderr and ENV_VAR in done.stderr
    assert "Traceback" not in done.stderr
    runs = workspace / ".flowdrop" / "runs"
    assert not runs.exists() or not list(runs.iterdir())


def test_a_flow_gets_the_workers_environment_without_its_secrets() -> None:
    url = "postgresql://flowdrop:s3cret@db.internal:5432/flowdrop"
    worker = {
        "PATH": "/usr/bin",
        "ANTHROPIC_API_KEY": "an agent's key stays the flow's",
        "FLOWDROP_POSTGRES": url,
        "FLOWDROP_TEMPORAL": "t:7233",
        "FLOWDROP_SERVE_TOKEN": "tok",
        "FLOWDROP_LIMIT_PROBE_SECONDS": "1",
        "PGPASSWORD": "s3cret",
        "PGPASSFILE": "/home/w/.pgpass",
        "DATABASE_URL": url,
        ENV_VAR: "file:/x",
    }
    assert flow_env(worker, url) == {
        "PATH": "/usr/bin",
        "ANTHROPIC_API_KEY": "an agent's key stays the flow's",
        "FLOWDROP_LIMIT_PROBE_SECONDS": "1",
    }
