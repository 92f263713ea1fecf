"""A key whose epoch was bumped by hand (``SELECT fd_bump(space, key)``, issue 38 item
7): its run is fenced out, so it must read ``interrupted`` and `stop` must settle it,
not leave it ``running`` for good with `stop` promising ``interrupted`` in 8 s. Real
PostgreSQL, the Temporal dev server and a real worker."""

from __future__ import annotations

from pathlib import Path

import psycopg

from tests.remote.cluster import Cluster, gated, make_client, wait_for


def test_a_bumped_key_s_run_reads_interrupted_and_the_key_is_free(
    cluster: Cluster, space: str, tmp_path: Path
) -> None:
    gate = tmp_path / "gate"
    gate.mkdir()
    worker = cluster.start_worker("a")
    worker.wait_polling()
    client = make_client(cluster, space, tmp_path)
    client.add_flow("held", gated(gate))
    run = client.json("run", "held")["run"]
    wait_for("the run live", lambda: client.json("show", run)["status"] == "running")

    with psycopg.connect(cluster.postgres, autocommit=True) as conn:
        conn.execute("SELECT fd_bump(%s, %s)", (space, "held"))

    def settled() -> bool:
        done = client.cli("stop", run, "--json", check=False)
        assert "shows interrupted within" not in done.stderr, done.stderr
        return bool(client.json("show", run)["status"] == "interrupted")

    wait_for("the bumped run interrupted", settled)
    # the fenced run's process (held at its gate) writes once let go: refused, it ends
    (gate / "go-1").touch()
    again = client.json("run", "held")["run"]  # the key is free: a pick-up
    assert again != run
    wait_for("the pick-up live", lambda: client.json("show", again)["status"] == "running")
    assert client.json("show", again)["picked_up_from"] == run
    client.json("stop", again, "--now")
    # The fenced run's end is an outcome, not a failure: the key's next start waited for
    # its workflow to close, and the worker logged no traceback for it.
    assert "Traceback" not in worker.text(), worker.text()
