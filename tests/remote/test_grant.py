"""`flowdrop-tui remote grant` (issue 38 item 1; docs/remote.md, "Who can do what"):
run by the tables' owner it makes the roles docs/remote.md's SQL makes, a login role
a member of one and, for an operator, its grant in the space; it takes them back with
`--revoke`; and it refuses an unknown role, a database role or space that does not
exist and a connection that may not grant, each in one line with a stable code. The
roles it makes then decide what a client may do, on a real worker."""

from __future__ import annotations

import re
import uuid
from pathlib import Path

import psycopg

from flowdrop_tui.core.remote.start import grants
from tests.remote.cluster import COUNTER, Client, Cluster, make_client
from tests.remote.test_roles import DOC, SQL, answer, as_role, configure


def refused(client: Client, code: str, status: int, *args: str) -> str:
    """The one line of a refused ``remote grant ARGS``, whose JSON code is ``code``."""
    done = client.cli("remote", "grant", *args, check=False)
    assert done.returncode == status, f"{args}: {done.returncode}\n{done.stdout}{done.stderr}"
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    said = answer(client, "remote", "grant", *args, code=status)
    assert said == {"error": {"code": code, "message": said["error"]["message"]}}, said
    return lines[0]


def member(url: str, role: str, group: str) -> bool:
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute("SELECT pg_has_role(%s, %s, 'MEMBER')", (role, group)).fetchone()
    return bool(row and row[0])


def operator_spaces(url: str, role: str) -> set[str]:
    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute("SELECT space FROM fd_grants WHERE role = %s", (role,)).fetchall()
    return {str(r[0]) for r in rows}


def test_the_docs_sql_is_what_remote_grant_runs() -> None:
    """Guards the two homes of the roles' SQL drifting apart."""
    found = SQL.search(DOC.read_text())
    assert found and found.group(1) == grants.ROLES_SQL


def test_remote_grant_makes_and_takes_back_roles_and_refuses_in_one_line(
    cluster: Cluster, space: str, tmp_path: Path
) -> None:
    client = make_client(cluster, space, tmp_path)
    client.add_flow("counter", COUNTER)
    worker = cluster.start_worker("a")
    worker.wait_polling()
    first = str(client.json("run", "counter")["run"])  # the space now has a key
    client.json("stop", first, "--now")
    suffix = uuid.uuid4().hex[:8]
    alice, bob = f"alice_{suffix}", f"bob_{suffix}"
    with psycopg.connect(cluster.postgres, autocommit=True) as conn:
        for role in (alice, bob):
            conn.execute(f"CREATE ROLE {role} LOGIN")

    # The owner grants: the roles are made, the membership and the space's row kept.
    said = answer(client, "remote", "grant", "operator", alice, code=0)
    assert said == {
        "role": "operator",
        "dbrole": alice,
        "space": space,
        "granted": True,
        "changed": True,
    }
    assert member(cluster.postgres, alice, "flowdrop_operator")
    assert operator_spaces(cluster.postgres, alice) == {space}
    assert answer(client, "remote", "grant", "operator", alice, code=0)["changed"] is False
    done = client.cli("remote", "grant", "viewer", bob)
    assert done.stdout.strip() == f"role {bob} is now a viewer", done.stdout
    assert member(cluster.postgres, bob, "flowdrop_viewer")
    assert not member(cluster.postgres, bob, "flowdrop_operator")
    everywhere = answer(client, "remote", "grant", "operator", alice, "--space", "*", code=0)
    assert everywhere["space"] == "*" and everywhere["changed"] is True

    # Each bad input: one line, a stable code and exit status.
    assert "unknown role 'boss'" in refused(client, "USAGE", 2, "boss", alice)
    gone = f"nobody_{suffix}"
    assert f"database role '{gone}' does not exist" in refused(
        client, "NOT_FOUND", 2, "viewer", gone
    )
    line = refused(client, "NOT_FOUND", 2, "operator", alice, "--space", f"nowhere-{suffix}")
    assert f"space 'nowhere-{suffix}' is unknown" in line

    # The roles decide: the viewer may not start; the operator may, in its space.
    configure(client, as_role(cluster.postgres, bob), space)
    line = refused(client, "NOT_PERMITTED", 3, "operator", bob)
    assert f"role {bob} may not make or grant roles" in line
    assert re.search(rf"`run`: role {bob} is a viewer in space {space}, and", _one(client, "run"))
    configure(client, as_role(cluster.postgres, alice), space)
    second = str(client.json("run", "counter")["run"])
    client.json("stop", second, "--now")

    # Taken back: the space's row, then (no row left) the membership.
    configure(client, cluster.postgres, space)
    back = answer(client, "remote", "grant", "--revoke", "operator", alice, code=0)
    assert back["granted"] is False and back["changed"] is True
    assert operator_spaces(cluster.postgres, alice) == {"*"}
    assert member(cluster.postgres, alice, "flowdrop_operator")  # still, for every space
    answer(client, "remote", "grant", "--revoke", "operator", alice, "--space", "*", code=0)
    assert operator_spaces(cluster.postgres, alice) == set()
    assert not member(cluster.postgres, alice, "flowdrop_operator")
    done = client.cli("remote", "grant", "--revoke", "viewer", bob)
    assert done.stdout.strip() == f"role {bob} is no longer a viewer", done.stdout
    assert not member(cluster.postgres, bob, "flowdrop_viewer")


def _one(client: Client, verb: str) -> str:
    done = client.cli(verb, "counter", check=False)
    assert done.returncode == 3, f"{done.returncode}\n{done.stdout}{done.stderr}"
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    return lines[0]
