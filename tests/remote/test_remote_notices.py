"""Notices in remote mode (issue 38, item 5; docs/remote.md, "Notices"): the space's
settings live in PostgreSQL (`remote config notify`), the worker that runs a run sends
each of its notices once — a gate's, `completed` when asked — and no client sends
any, however many have the inbox or the UI open and whatever `[notify]` their own
config holds.
Before, every client machine sent its own copy and `completed` never went out.
Real servers, real workers, the real CLI; the sink is a command appending to a file."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections import Counter
from pathlib import Path

import orjson
import psycopg

from flowdrop_tui.core.paths import Layout
from flowdrop_tui.core.remote.config import RemoteConfig
from flowdrop_tui.core.remote.remote_mode import RemoteMode
from flowdrop_tui.tui.app import FlowdropApp
from tests.remote.cluster import Client, Cluster, make_client, wait_for
from tests.tui.tui_helpers import until

SINK = """
import os, sys
data = sys.stdin.buffer.read()
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_APPEND | os.O_CREAT)
os.write(fd, data + b"\\n")
"""

ASKS = """
    from flowdrop_tui import flow

    @flow()
    def main(run):
        for n in run.rounds(range(1)):
            answer = run.ask("ship it?", choices=["yes", "no"])
            run.state["answer"] = answer
        return answer
"""


def received(path: Path) -> list[dict[str, object]]:
    if not path.exists():
        return []
    return [orjson.loads(line) for line in path.read_bytes().splitlines() if line.strip()]


def sink(out: Path) -> str:
    return orjson.dumps([sys.executable, "-c", SINK, str(out)]).decode()


def second_client(first: Client, tmp: Path) -> Client:
    """Another machine's clone of the same origin, space and config."""
    clone = tmp / "second-clone"
    subprocess.run(
        ["git", "clone", "-q", str(first.origin), str(clone)], check=True, capture_output=True
    )
    assert (clone / ".flowdrop" / "config.toml").read_text() == (
        first.ws / ".flowdrop" / "config.toml"
    ).read_text()
    return Client(clone, first.origin, first.postgres, first.space)


def no_client_claimed(client: Client, run: str) -> None:
    """A client that sent a notice left its claim in its replica and its spool."""
    root = client.ws / ".flowdrop"
    assert not (root / "runs" / run / "notices").exists(), list((root / "runs" / run).iterdir())
    assert not any((root / "notices" / "spool").glob("*.json"))


def test_a_gate_and_completed_go_out_once_from_the_worker_with_two_clients_open(
    cluster: Cluster, space: str, tmp_path: Path
) -> None:
    team = tmp_path / "team-notices.jsonl"
    mine = tmp_path / "client-notices.jsonl"
    first = make_client(cluster, space, tmp_path)
    # An old local [notify] in the clients' config — committed with it here, so the
    # worker's checkout holds it too: neither a client nor the worker may send with it.
    with (first.ws / ".flowdrop" / "config.toml").open("a") as config:
        config.write(f"[notify]\ncommand = {sink(mine)}\ncompleted = true\n")
    first.add_flow("asks", ASKS)
    second = second_client(first, tmp_path)

    assert "sends no notices" in first.cli("remote", "config", "notify").stdout
    first.cli("remote", "config", "notify", f"command={sink(team)}", "completed=true")
    shown = second.json("remote", "config", "notify")
    assert shown == {
        "space": space,
        "notify": {"command": orjson.loads(sink(team)), "completed": True},
    }

    worker = cluster.start_worker("a")
    worker.wait_polling()
    run = str(first.json("run", "asks")["run"])
    wait_for(
        "the run to pause on its question", lambda: first.json("show", run)["status"] == "paused"
    )
    # Both clients look at the inbox, as the UI does every few seconds: before, each
    # machine claimed the gate's notice in its own replica and sent it with its config.
    for client in (first, second, first, second):
        items = client.json("inbox")
        assert [i["kind"] for i in items if i["run"] == run] == ["gate"]
        no_client_claimed(client, run)
    # And the UI open on the first machine, which looks at the inbox every few seconds.
    asyncio.run(ui_looks_at_the_inbox(first, run))
    no_client_claimed(first, run)
    wait_for("the gate's notice", lambda: [n["kind"] for n in received(team)] == ["gate"])

    second.cli("answer", run, "yes")
    wait_for("the run to complete", lambda: first.json("show", run)["status"] == "completed")
    wait_for("completed's notice", lambda: len(received(team)) == 2)
    for client in (first, second):
        client.json("inbox")
        no_client_claimed(client, run)
    kinds = Counter(str(n["kind"]) for n in received(team))
    assert kinds == Counter({"gate": 1, "completed": 1}), received(team)
    assert {n["run"] for n in received(team)} == {run}
    assert received(mine) == []  # the clients' own [notify] sent nothing
    assert sorted(str(e["kind"]) for e in ledger(first, run)) == ["completed", "gate"]


async def ui_looks_at_the_inbox(client: Client, run: str) -> None:
    """The UI in remote mode, open until it has looked at the inbox and seen the run's
    gate there (its look is the one that sent a died run's notices locally)."""
    layout = Layout(client.ws)
    remote = RemoteConfig(temporal="127.0.0.1:9", postgres=client.postgres, space=client.space)
    app = FlowdropApp(layout, RemoteMode(layout, remote))
    async with app.run_test(size=(120, 36)) as pilot:
        seen = lambda: any(i.startswith(f"{run}/gate-") for i in app._inbox_seen)  # noqa: E731
        await until(pilot, seen, timeout=60, what="the UI's look at the inbox")


def ledger(client: Client, run: str) -> list[dict[str, object]]:
    """The run's ``notice_sent`` events, as PostgreSQL holds its record."""
    client.sync()
    lines = (client.ws / ".flowdrop" / "runs" / run / "cycle.jsonl").read_bytes().splitlines()
    events = [orjson.loads(line) for line in lines if line.strip()]
    return [e for e in events if e.get("event") == "notice_sent"]


def test_a_run_continued_on_another_worker_after_a_loss_sends_each_notice_once(
    cluster: Cluster, space: str, tmp_path: Path
) -> None:
    """The gate's notice went from worker a; a is lost; the answer continues the run
    on worker b, which sends `completed` — and nothing a sent again."""
    team = tmp_path / "team-notices.jsonl"
    client = make_client(cluster, space, tmp_path)
    client.add_flow("asks", ASKS)
    client.cli("remote", "config", "notify", f"command={sink(team)}", "completed=true")
    first = cluster.start_worker("a")
    first.wait_polling()
    run = str(client.json("run", "asks")["run"])
    wait_for("the gate's notice", lambda: [n["kind"] for n in received(team)] == ["gate"])
    first.kill_machine()

    second = cluster.start_worker("b")
    second.wait_polling()
    client.cli("answer", run, "yes")
    wait_for("the run to complete", lambda: client.json("show", run)["status"] == "completed")
    wait_for("completed's notice", lambda: len(received(team)) == 2)
    sent_from_b = list((second.home / "flowdrop-worker" / "notices").glob("*/.flowdrop"))
    assert sent_from_b, "b sent completed from its own folder for the space"
    client.json("inbox")
    assert Counter(str(n["kind"]) for n in received(team)) == Counter(
        {"gate": 1, "completed": 1}
    ), received(team)
    assert sorted(str(e["kind"]) for e in ledger(client, run)) == ["completed", "gate"]


def test_only_an_admin_changes_the_spaces_notices_and_a_viewer_sees_them(
    cluster: Cluster, space: str, tmp_path: Path
) -> None:
    from tests.remote.test_roles import as_role, configure, make_roles

    client = make_client(cluster, space, tmp_path)
    client.cli("remote", "config", "notify", "completed=true", "webhook=https://hooks.test/x")
    suffix = make_roles(cluster.postgres)
    viewer, operator = f"viewer_{suffix}", f"op_{suffix}"
    with psycopg.connect(cluster.postgres, autocommit=True) as conn:
        conn.execute(f"CREATE ROLE {viewer} LOGIN IN ROLE flowdrop_viewer")
        conn.execute(f"CREATE ROLE {operator} LOGIN IN ROLE flowdrop_operator")
    for role in (viewer, operator):
        configure(client, as_role(cluster.postgres, role), space)
        shown = client.json("remote", "config", "notify")["notify"]
        assert shown == {"completed": True, "webhook": "https://hooks.test/x"}
        done = client.cli("remote", "config", "notify", "completed=false", check=False)
        assert done.returncode == 3, done.stderr
        assert "permission denied" in done.stderr and "admin sets them" in done.stderr
        assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    configure(client, cluster.postgres, space)
    assert client.json("remote", "config", "notify", "--unset", "webhook")["notify"] == {
        "completed": True
    }
