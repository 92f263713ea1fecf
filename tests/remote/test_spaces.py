"""Two repositories that leave `space` unset never share one (docs/remote.md, "Schema"):
each gets its origin's URL, normalised, as its space — against the real servers."""

from __future__ import annotations

from pathlib import Path

from flowdrop_tui.core.remote.config import space_of_origin
from flowdrop_tui.core.remote.postgres.store import PostgresStore
from tests.remote.cluster import COUNTER, Client, Cluster, wait_for
from tests.remote.git_origin import make_origin


def unspaced_client(cluster: Cluster, tmp: Path) -> Client:
    """A clone configured for the cluster with neither `space` nor `origin`."""
    tmp.mkdir(parents=True)
    origin, clone = make_origin(tmp)
    (clone / ".flowdrop").mkdir()
    (clone / ".flowdrop" / "config.toml").write_text(
        "[remote]\n"
        f'temporal = "{cluster.temporal}"\n'
        f'postgres = "{cluster.postgres}"\n'
        f'task_queue = "{cluster.task_queue}"\n'
    )
    return Client(clone, origin, cluster.postgres, space_of_origin(str(origin)))


def test_two_repositories_without_a_space_keep_apart(cluster: Cluster, tmp_path: Path) -> None:
    """Guards against repo B's `counter` refused ALREADY_RUNNING because of repo A's
    run, then picking up A's state: both in the space `default`."""
    worker = cluster.start_worker("a", max_runs=2)
    one = unspaced_client(cluster, tmp_path / "one")
    two = unspaced_client(cluster, tmp_path / "two")
    assert one.space != two.space and one.space.startswith("local:")
    for client in (one, two):
        client.add_flow("counter", COUNTER)
    worker.wait_polling()
    first = one.json("run", "counter")["run"]
    wait_for("rounds in one", lambda: one.json("show", first)["state"]["counter"]["round"] >= 3)
    second = two.json("run", "counter")["run"]  # not ALREADY_RUNNING: another space
    shown = wait_for(
        "a round in two",
        lambda: (lambda s: s if s["state"].get("counter", {}).get("round") else None)(
            two.json("show", second)
        ),
    )
    assert shown["picked_up_from"] is None and shown["first_round"] == 1  # not one's state
    assert [r["run"] for r in two.json("runs")] == [second]  # one's run is not seen here
    for client, run in ((one, first), (two, second)):
        store = PostgresStore(cluster.postgres, client.space)
        try:
            assert store.run_ids() == [run]
        finally:
            store.close()
        client.json("stop", run, "--now")


def test_a_repository_without_an_origin_or_space_is_refused(
    cluster: Cluster, tmp_path: Path
) -> None:
    """Guards against a space chosen silently for a repository that names none."""
    client = unspaced_client(cluster, tmp_path / "lone")
    from tests.remote.git_origin import git

    git(client.ws, "remote", "remove", "origin")
    done = client.cli("runs", check=False)
    assert done.returncode == 2, done.stderr
    [line] = done.stderr.strip().splitlines()
    assert "remote mode needs a space" in line and "FLOWDROP_SPACE" in line, line
