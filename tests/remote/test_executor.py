"""The mode seam: local mode stays today's code; remote mode only when configured."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from flowdrop_tui.core.errors import UsageError
from flowdrop_tui.core.mode import REMOTE_RUN_ENV, LocalMode, choose
from flowdrop_tui.core.paths import Layout
from flowdrop_tui.core.remote.daemon.start_checks import check_request
from flowdrop_tui.core.remote.workflow import FlowInput

CONFIG = (
    '[remote]\ntemporal = "127.0.0.1:1"\npostgres = "postgresql://x@127.0.0.1:1/p"\nspace = "s"\n'
)


def test_no_config_is_local_and_a_run_child_is_always_local(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Guards against a run child on a worker (which inherits the worker's remote
    settings) sending itself back to the cluster instead of running."""
    for var in [v for v in os.environ if v.startswith("FLOWDROP_")]:
        monkeypatch.delenv(var)
    layout = Layout(tmp_path)
    assert isinstance(choose(layout), LocalMode)
    layout.root.mkdir()
    (layout.root / "config.toml").write_text(CONFIG)
    remote = choose(layout)
    assert type(remote).__name__ == "RemoteMode"
    assert remote.started_elsewhere(lambda: {"run": "r"}) == {"run": "r"}
    monkeypatch.setenv(REMOTE_RUN_ENV, '{"space": "s"}')
    assert isinstance(choose(layout), LocalMode)


@pytest.mark.parametrize("var", ["FLOWDROP_TEMPORAL", "FLOWDROP_POSTGRES"])
def test_a_variable_alone_still_reaches_the_config(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, var: str
) -> None:
    """Guards the seam's shortcut (no config file, no ``FLOWDROP_*``: local without
    reading the config) from swallowing a remote mode given by the environment alone:
    half of it is refused as before, never taken for local mode."""
    for name in [v for v in os.environ if v.startswith("FLOWDROP_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv(var, "127.0.0.1:1")
    with pytest.raises(UsageError, match="half configured"):
        choose(Layout(tmp_path))


def test_local_stop_and_detached_run_never_import_the_remote_drivers(tmp_path: Path) -> None:
    """Guards local mode's cost: the verbs that go through the mode seam load
    neither temporalio nor psycopg without a remote config."""
    code = (
        "import sys\n"
        "from flowdrop_tui import cli\n"
        "for argv in (['run', 'nope', '--detach'], ['stop', 'x'], ['pause', 'x'],"
        " ['resume', 'x', '--detach']):\n"
        f"    cli.main(['--workspace', {str(tmp_path)!r}, *argv])\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('temporalio', 'psycopg'))\n"
        "print('LOADED=' + ','.join(bad))\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLOWDROP_")}
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env
    )
    assert done.stdout.strip().splitlines()[-1] == "LOADED="


def test_the_run_child_variable_is_the_mirrors() -> None:
    """Guards against the executor's local check and the mirror naming two variables."""
    from flowdrop_tui.core.remote.daemon import write_through

    assert REMOTE_RUN_ENV == write_through.ENV_VAR


def request(mode: str, args: list[str]) -> FlowInput:
    return FlowInput("s", "k", mode, args, "0" * 40, "/origin")


@pytest.mark.parametrize(
    ("mode", "args"),
    [
        ("run", []),
        ("run", ["resume", "x"]),
        ("bogus", ["run", "k"]),
        ("run", ["run", "k", "--workspace", "/etc"]),
        ("run", ["run", "k", "--workspace=/etc"]),
        ("resume", ["resume", "x", "--handshake-fd", "0"]),
        ("close", ["run", "k"]),
        ("run", ["run", "k\0"]),
    ],
)
def test_a_worker_refuses_a_command_line_no_client_sends(mode: str, args: list[str]) -> None:
    """Guards against a request on the task queue steering a worker's run child out
    of its worktree or into its handshake (the worker picks those itself)."""
    with pytest.raises(UsageError) as refused:
        check_request(request(mode, args))
    assert "is not one flowdrop-tui sends" in refused.value.message


def test_a_worker_takes_what_a_client_sends() -> None:
    """Proves by not raising: every request shape ``StartClient`` sends (run, resume,
    close) passes the worker's check — the refusals above do not catch its own words."""
    check_request(request("run", ["run", "flows/x", "--fresh", "--max-rounds", "3"]))
    check_request(request("resume", ["resume", "20260817T014455.212Z-9f21ab", "--by", "{}"]))
    check_request(request("close", ["stop", "20260817T014455.212Z-9f21ab"]))
