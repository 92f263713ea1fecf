"""Who can do what in remote mode (issue 38 item 1; docs/remote.md, "Who can do what"):
the roles docs/remote.md's SQL makes, run as written, then a viewer's and an operator's
refusals by PostgreSQL and by the worker, and a worker that serves only the spaces
and origins it was told to. Real PostgreSQL (its roles and grants), the Temporal dev
server and real workers; the CLI only, as a team would type it."""

from __future__ import annotations

import asyncio
import re
import uuid
from pathlib import Path
from typing import Any

import orjson
import psycopg
import pytest

from flowdrop_tui.core.remote import shared_pins
from flowdrop_tui.core.remote.postgres import shared_files
from flowdrop_tui.core.remote.postgres.store import PostgresStore
from flowdrop_tui.core.remote.start import grants
from tests.remote.cluster import COUNTER, Client, Cluster, make_client, wait_for
from tests.remote.servers import new_space

DOC = Path(__file__).resolve().parents[2] / "docs" / "remote.md"
SQL = re.compile(r"<!-- roles-sql -->\s*```sql\n(.*?)```\s*<!-- /roles-sql -->", re.DOTALL)


def as_role(url: str, role: str) -> str:
    """The same server and database, logging in as ``role`` (the test server trusts)."""
    return re.sub(r"//[^@/]*@", f"//{role}@", url, count=1)


def configure(client: Client, url: str, space: str) -> None:
    """The client's .flowdrop/config.toml, logging in with ``url`` in ``space``."""
    config = client.ws / ".flowdrop" / "config.toml"
    text = re.sub(r'postgres = "[^"]*"', f'postgres = "{url}"', config.read_text())
    text = re.sub(r'space = "[^"]*"', f'space = "{space}"', text)
    config.write_text(text)


def answer(client: Client, *args: str, code: int) -> Any:
    """The JSON answer of ``ARGS --json`` (an object, or a list of rows), exit ``code``."""
    done = client.cli(*args, "--json", check=False)
    assert done.returncode == code, f"{args}: {done.returncode}\n{done.stdout}{done.stderr}"
    return orjson.loads(done.stdout)


def not_permitted(client: Client, *args: str) -> str:
    done = client.cli(*args, check=False)
    assert done.returncode == 3, f"{args}: {done.returncode}\n{done.stdout}{done.stderr}"
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert answer(client, *args, code=3)["error"]["code"] == "NOT_PERMITTED"
    return lines[0]


def ended_run(client: Client) -> str:
    run = str(client.json("run", "counter")["run"])
    client.json("stop", run, "--now")
    wait_for(f"{run} cancelled", lambda: client.json("show", run)["status"] == "cancelled")
    return run


def stop_through_temporal(cluster: Cluster, space: str, control: str | None) -> dict[str, Any]:
    """The ``control`` Update of the key's workflow sent straight to Temporal, as one who
    reaches the namespace could, naming the fd_controls row ``control``."""
    from flowdrop_tui.core.remote.temporal_client import connect
    from flowdrop_tui.core.remote.workflow import ControlRequest, FlowKeyWorkflow, workflow_id

    async def send() -> dict[str, Any]:
        client = await connect(cluster.temporal, "default")
        handle = client.get_workflow_handle(workflow_id(space, "counter"))
        said: dict[str, Any] = await handle.execute_update(
            FlowKeyWorkflow.control, ControlRequest("stop_now", {}, control)
        )
        return said

    return asyncio.run(send())


def make_roles(url: str) -> str:
    """docs/remote.md's SQL, as written, on tables made as a worker makes them; a
    suffix for this test's login roles (roles are the whole server's)."""
    store = PostgresStore(url, "")
    try:
        store.ensure_schema()
    finally:
        store.close()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(shared_pins.SCHEMA)
        conn.execute(shared_files.SCHEMA)
        found = SQL.search(DOC.read_text())
        assert found, "docs/remote.md lost its roles SQL"
        with conn.transaction():  # tests at once on one server: one grant at a time
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (grants.ROLES_LOCK,))
            conn.execute(found.group(1))
    return uuid.uuid4().hex[:8]


def test_a_viewer_reads_and_is_refused_the_rest_and_an_operator_only_its_space(
    cluster: Cluster, space: str, tmp_path: Path
) -> None:
    worker = cluster.start_worker("a")
    client = make_client(cluster, space, tmp_path)
    client.add_flow("counter", COUNTER)
    worker.wait_polling()
    first, second = ended_run(client), ended_run(client)
    suffix = make_roles(cluster.postgres)
    viewer, operator = f"viewer_{suffix}", f"op_{suffix}"
    with psycopg.connect(cluster.postgres, autocommit=True) as conn:
        conn.execute(f"CREATE ROLE {viewer} LOGIN IN ROLE flowdrop_viewer")
        conn.execute(f"CREATE ROLE {operator} LOGIN IN ROLE flowdrop_operator")
        conn.execute("INSERT INTO fd_grants VALUES (%s, %s, 'operator')", (space, operator))

    # The viewer reads as anyone does, and is refused every write, in one line.
    live = str(client.json("run", "counter")["run"])  # the team's, as the owner
    configure(client, as_role(cluster.postgres, viewer), space)
    rows = answer(client, "runs", "counter", code=0)
    assert {r["run"] for r in rows} == {first, second, live}
    line = not_permitted(client, "run", "counter")
    assert f"`run`: role {viewer} is a viewer in space {space}" in line
    assert "fd_starts" in line and f"remote grant operator {viewer} --space {space}" in line
    for verb in (("stop", live), ("stop", live, "--now"), ("pause", live)):
        assert "fd_controls" in not_permitted(client, *verb), verb
    assert f"`stop`: role {viewer} is a viewer" in not_permitted(client, "stop", live)
    configure(client, cluster.postgres, space)
    client.json("stop", live, "--now")
    wait_for(f"{live} cancelled", lambda: client.json("show", live)["status"] == "cancelled")
    configure(client, as_role(cluster.postgres, viewer), space)
    not_permitted(client, "pin", second)
    not_permitted(client, "prune", "--keep", "0")
    with psycopg.connect(as_role(cluster.postgres, viewer), autocommit=True) as conn:
        for call in ("SELECT fd_bump(%s, 'counter')", "SELECT fd_reap(%s, 'counter', NULL)"):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute(call, (space,))
    # The start a viewer asked was never inserted: nothing was run.
    assert {r["run"] for r in answer(client, "runs", "counter", code=0)} == {
        first,
        second,
        live,
    }

    # The operator starts, pins and stops in its space, and may not prune or bump.
    configure(client, as_role(cluster.postgres, operator), space)
    third = str(client.json("run", "counter")["run"])
    answer(client, "pin", third, code=0)
    # The worker acts on a stop only through a row of fd_controls an operator of the
    # run's space made: an Update through Temporal alone, or naming a row of another
    # space, is refused by the worker and the run goes on.
    assert stop_through_temporal(cluster, space, None)["error"]["code"] == "NOT_PERMITTED"
    with psycopg.connect(as_role(cluster.postgres, operator), autocommit=True) as conn:
        conn.execute(
            "INSERT INTO fd_controls (id, space, run_id, verb)"
            " VALUES (%s, 'x-other', %s, 'stop_now')",
            (f"ctl-{suffix}", third),
        )
    refused = stop_through_temporal(cluster, space, f"ctl-{suffix}")["error"]
    assert refused["code"] == "NOT_PERMITTED" and "not granted operator" in refused["message"]
    assert client.json("show", third)["status"] == "running"
    client.json("stop", third, "--now")
    wait_for(f"{third} cancelled", lambda: client.json("show", third)["status"] == "cancelled")
    line = not_permitted(client, "prune", "--keep", "0")
    assert f"`prune`: role {operator} is an operator in space {space}" in line
    with psycopg.connect(as_role(cluster.postgres, operator), autocommit=True) as conn:
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("SELECT fd_bump(%s, 'counter')", (space,))
        # who asked is the database's to say: a row claiming another role says this one
        conn.execute(
            "INSERT INTO fd_starts (id, space, key, namespace, task_queue, request, asked_by)"
            " VALUES (%s, %s, 'k', 'n', 'nobody-polls', '{}', 'postgres')",
            (f"forged-{suffix}", space),
        )
        row = conn.execute(
            "SELECT asked_by FROM fd_starts WHERE id = %s", (f"forged-{suffix}",)
        ).fetchone()
        assert row == (operator,)
        conn.execute("DELETE FROM fd_starts WHERE id = %s", (f"forged-{suffix}",))

    # In a space it is not granted, the worker refuses its start, and says why.
    elsewhere = new_space("b")
    configure(client, as_role(cluster.postgres, operator), elsewhere)
    refusal = answer(client, "run", "counter", code=3)["error"]
    assert refusal["code"] == "NOT_PERMITTED", refusal
    assert f"role {operator} is not granted operator in that space" in refusal["message"]
    assert f"space {elsewhere}" in refusal["message"]


def test_a_worker_runs_only_the_spaces_and_origins_it_serves(
    cluster: Cluster, space: str, tmp_path: Path
) -> None:
    client = make_client(cluster, space, tmp_path)
    client.add_flow("counter", COUNTER)
    other = cluster.start_worker("elsewhere", extra=("--space", "x-other", "--origin", "git@h:o/p"))
    other.wait_polling()
    refusal = answer(client, "run", "counter", code=3)["error"]
    assert refusal["code"] == "NOT_SERVED" and "x-other" in refusal["message"], refusal
    other.stop()
    served = cluster.start_worker("served", extra=("--space", space, "--origin", "git@h:o/p"))
    served.wait_polling()
    refusal = answer(client, "run", "counter", code=3)["error"]
    assert refusal["code"] == "NOT_SERVED" and str(client.origin) in refusal["message"], refusal
    served.stop()
    both = cluster.start_worker("both", extra=("--space", space, "--origin", str(client.origin)))
    both.wait_polling()
    run = str(client.json("run", "counter")["run"])
    client.json("stop", run, "--now")
