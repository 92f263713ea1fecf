"""Bad server settings in remote mode: each is one clear line naming the setting and
what to do, with a stable code and exit status — never a driver's raw text."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from flowdrop_tui.core.flows.discovery import resolve_flow
from flowdrop_tui.core.mode import choose
from flowdrop_tui.core.paths import Layout
from flowdrop_tui.core.remote.postgres.store import PostgresStore
from flowdrop_tui.core.remote.temporal_client import TemporalUnreachableError
from flowdrop_tui.core.run import forecast
from tests.flow_bodies import counts_rounds
from tests.remote.machines import Machine, WorkerChild, clone, make_origin

NOBODY = "127.0.0.1:1"  # nothing listens on port 1


@pytest.fixture
def client(
    tmp_path: Path, postgres_url: str, space: str, pg_store: PostgresStore
) -> Iterator[Machine]:
    origin = make_origin(tmp_path, {"forever": counts_rounds(sleep=0.2)})
    machine = Machine(clone(origin, tmp_path / "client"), postgres_url, space, origin)
    machine.env["FLOWDROP_TEMPORAL"] = NOBODY
    yield machine


def one_line(stderr: str) -> str:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    return lines[0]


def temporal_words(line: str) -> None:
    assert f"Temporal server at {NOBODY}" in line, line
    assert "connection refused" in line
    assert "start the Temporal server" in line and "FLOWDROP_TEMPORAL" in line
    assert "tonic" not in line and "Failed client connect" not in line


def test_temporal_unreachable_is_one_clear_line_exit_4(
    client: Machine, tmp_path: Path, postgres_url: str, space: str
) -> None:
    """Guards the Rust client's dump: run, stop and pause of a live run say where the
    Temporal server was looked for and what to do, code TEMPORAL_UNREACHABLE, exit 4;
    an http:// address works the same, without the SDK's warning."""
    temporal_words(one_line(client.cli("run", "forever", check=4).stderr))
    answer = client.json("run", "forever", check=4)
    assert answer["error"]["code"] == "TEMPORAL_UNREACHABLE"
    temporal_words(answer["error"]["message"])
    client.env["FLOWDROP_TEMPORAL"] = f"http://{NOBODY}/"
    done = client.cli("run", "forever", check=4)
    assert "Warning" not in done.stderr  # the SDK's UserWarning about the scheme
    temporal_words(one_line(done.stderr))
    client.env["FLOWDROP_TEMPORAL"] = NOBODY
    worker_ws = clone(tmp_path / "origin.git", tmp_path / "worker")
    child = WorkerChild(worker_ws, postgres_url, space, "forever")
    try:
        for verb in (["stop", child.run_id], ["pause", child.run_id]):
            temporal_words(one_line(client.cli(*verb, check=4).stderr))
            assert client.json(*verb, check=4)["error"]["code"] == "TEMPORAL_UNREACHABLE"
    finally:
        child.close()


def test_a_remote_start_never_loads_temporals_sdk(client: Machine) -> None:
    """Guards a start's cost (issue 28): `run` in remote mode asks a worker through
    PostgreSQL; importing temporalio was ~0.3 s of a 1.0 s start. An unreachable
    Temporal server is still said at once, in the same line (a TCP probe)."""
    client.env["PYTHONPROFILEIMPORTTIME"] = "1"  # python -X importtime
    done = client.cli("run", "forever", check=4)
    imported = [line for line in done.stderr.splitlines() if line.startswith("import time:")]
    assert any(line.endswith(" psycopg") for line in imported)  # it did get that far
    assert not [line for line in imported if "temporalio" in line]
    said = [line for line in done.stderr.splitlines() if not line.startswith("import time:")]
    temporal_words(one_line("\n".join(said)))


def test_the_uis_enter_meets_the_same_error(
    client: Machine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Guards the UI's enter: it starts through the same mode, which raises the
    same clear error (shown as the UI's refusal line)."""
    for name, value in client.env.items():
        if name.startswith("FLOWDROP_"):
            monkeypatch.setenv(name, value)
    layout = Layout(client.ws)
    ref = resolve_flow(layout, "forever", cwd=client.ws)
    with pytest.raises(TemporalUnreachableError) as caught:
        choose(layout).start(ref, forecast.StartOptions(from_run=None, fresh=False), [])
    assert caught.value.exit_code == 4
    temporal_words(caught.value.message)


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        ("http://someone:secret@127.0.0.1:5432/x", "'http://someone:***@127.0.0.1:5432/x'"),
        ("127.0.0.1:5432", "'127.0.0.1:5432'"),
    ],
)
def test_an_unparsable_postgres_url_is_a_usage_error(
    client: Machine, value: str, shown: str
) -> None:
    """Guards '<unparsable URL>' and libpq's line break: one line naming the setting and
    an example, exit 2 (USAGE), never the password."""
    client.env["FLOWDROP_POSTGRES"] = value
    for verb in (["runs"], ["run", "forever"], []):
        line = one_line(client.cli(*verb, check=2).stderr)
        assert shown in line and "FLOWDROP_POSTGRES" in line, line
        assert "postgresql://user@host:5432/dbname" in line
        assert "secret" not in line
    assert client.json("runs", check=2)["error"]["code"] == "USAGE"


def test_a_bad_temporal_address_is_a_usage_error(client: Machine) -> None:
    """Guards a scheme or a missing port reaching the SDK: refused in one line."""
    for value in ("https://t.internal:7233", "t.internal"):
        client.env["FLOWDROP_TEMPORAL"] = value
        line = one_line(client.cli("run", "forever", check=2).stderr)
        assert repr(value) in line and "FLOWDROP_TEMPORAL" in line
        assert "e.g. temporal.internal:7233" in line


def test_a_missing_database_role_or_password_says_what_postgres_said(
    client: Machine, postgres_url: str
) -> None:
    """Guards "cannot reach … check that the server is running" for a server that is
    running: what it refused and how to create what is missing, code STORE_ERROR."""
    base = psycopg.conninfo.conninfo_to_dict(postgres_url)
    host, port = base["host"], base["port"]
    user = base.get("user")
    owner = f"{user}@" if user else ""
    cases = [
        (
            f"postgresql://{owner}{host}:{port}/nosuchdb",
            ['has no database "nosuchdb"', f"createdb -h {host} -p {port}"],
        ),
        (
            f"postgresql://nosuchrole@{host}:{port}/postgres",
            ['has no role "nosuchrole"', 'CREATE ROLE "nosuchrole" LOGIN'],
        ),
    ]
    for url, words in cases:
        client.env["FLOWDROP_POSTGRES"] = url
        line = one_line(client.cli("runs", check=1).stderr)
        for word in [*words, "FLOWDROP_POSTGRES"]:
            assert word in line, line
        assert "cannot reach" not in line and "server is running" not in line
        answer = client.json("runs", check=1)
        assert answer["error"]["code"] == "STORE_ERROR"
