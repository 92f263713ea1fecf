"""PostgresStore against a real PostgreSQL: claims, fencing, liveness, prune, schema."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import psycopg
import pytest

from flowdrop_tui.core.errors import AlreadyRunningError, FlowdropError
from flowdrop_tui.core.remote.postgres.schema import SCHEMA_VERSION
from flowdrop_tui.core.remote.postgres.store import PostgresStore
from flowdrop_tui.core.remote.remote_errors import (
    Fenced,
    StoreConflictError,
    StoreError,
    StoreUnreachableError,
)
from tests.conftest import wait_for
from tests.remote.servers import free_port

RUN_A = "20261130T120000.000Z-aaaaaa"
RUN_B = "20261130T120001.000Z-bbbbbb"


def second_writer(store: PostgresStore) -> PostgresStore:
    """Another process's view of the same space: its own connection."""
    return PostgresStore(store.url, store.space)


def test_claim_gives_a_new_epoch_and_refuses_a_key_with_a_live_run(pg_store: PostgresStore) -> None:
    """Guards one live run per key: a second claim while a run is live is ALREADY_RUNNING."""
    first = pg_store.claim("nightly", worker="w1")
    assert first == 1
    pg_store.publish("nightly", first, RUN_A, {"cycle.jsonl": b'{"event":"created"}\n'})
    pg_store.set_live("nightly", first, RUN_A, worker="w1", host="hostA", pid=4242)
    with pytest.raises(AlreadyRunningError) as refused:
        pg_store.claim("nightly", worker="w2")
    assert refused.value.code == "ALREADY_RUNNING"
    assert RUN_A in refused.value.message and "w1" in refused.value.message
    assert pg_store.key_epoch("nightly") == first  # a refused claim bumps nothing
    pg_store.clear_live("nightly", first, RUN_A)
    assert pg_store.claim("nightly", worker="w2") == first + 1
    assert pg_store.claim("other", worker="w2") == 1  # keys are independent


def test_a_later_claim_fences_a_claimant_that_never_went_live(pg_store: PostgresStore) -> None:
    """Two racing claims: the later one wins, the earlier can write nothing at all."""
    early = pg_store.claim("k", worker="w1")
    late = pg_store.claim("k", worker="w2")
    assert late == early + 1
    with pytest.raises(Fenced):
        pg_store.publish("k", early, RUN_A, {"state.json": b"{}"})
    with pytest.raises(Fenced):
        pg_store.set_live("k", early, RUN_A, worker="w1", host="h", pid=1)
    pg_store.publish("k", late, RUN_B, {"state.json": b"{}"})
    assert pg_store.run_ids() == [RUN_B]


def test_an_old_epoch_is_refused_for_every_write_after_a_bump(pg_store: PostgresStore) -> None:
    """Guards against two writers after a partition: once fenced, nothing of A lands."""
    old = pg_store.claim("k", worker="w1")
    a = second_writer(pg_store)
    try:
        a.publish("k", old, RUN_A, {"cycle.jsonl": b"one\n", "state.json": b'{"n":1}'})
        a.append_line("k", old, RUN_A, "cycle.jsonl", b"two\n")
        new = pg_store.fence("k")
        assert new == old + 1
        attempts: list[Callable[[], Any]] = [
            lambda: a.write_file("k", old, RUN_A, "state.json", b'{"n":2}'),
            lambda: a.append_line("k", old, RUN_A, "cycle.jsonl", b"three\n"),
            lambda: a.publish("k", old, RUN_B, {"state.json": b"{}"}),
            lambda: a.set_live("k", old, RUN_A, worker="w1", host="h", pid=1),
            lambda: a.clear_live("k", old, RUN_A),
        ]
        for attempt in attempts:
            with pytest.raises(Fenced) as fenced:
                attempt()
            assert fenced.value.code == "FENCED"
            assert f"epoch {old}" in fenced.value.message and f"now {new}" in fenced.value.message
        # the new epoch's writer carries on where the record stood
        pg_store.append_line("k", new, RUN_A, "cycle.jsonl", b"three\n")
    finally:
        a.close()
    assert pg_store.read_file(RUN_A, "cycle.jsonl") == b"one\ntwo\nthree\n"
    assert pg_store.read_file(RUN_A, "state.json") == b'{"n":1}'
    assert pg_store.read_file(RUN_B, "state.json") is None


def test_a_key_never_claimed_takes_no_write(pg_store: PostgresStore) -> None:
    with pytest.raises(Fenced) as fenced:
        pg_store.write_file("never", 1, RUN_A, "state.json", b"{}")
    assert "now none" in fenced.value.message


def _waiting_on_lock(store: PostgresStore, function: str) -> bool:
    rows = store._rows(
        "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE %s",
        (f"SELECT {function}(%",),
    )
    return bool(rows[0][0])


def test_a_bump_waits_for_a_write_in_flight_and_the_write_after_it_is_refused(
    pg_store: PostgresStore, postgres_url: str
) -> None:
    """Guards the fence's ordering: a write that passed the epoch check commits before
    the bump does (the bump waits on the key row), and the next write sees the bump."""
    old = pg_store.claim("k", worker="w1")
    pg_store.publish("k", old, RUN_A, {"state.json": b'{"n":0}'})
    writer, fencer = second_writer(pg_store), second_writer(pg_store)
    results: dict[str, Any] = {}

    def run(name: str, call: Callable[[], Any]) -> threading.Thread:
        def body() -> None:
            try:
                results[name] = call()
            except Exception as exc:
                results[name] = exc

        thread = threading.Thread(target=body, daemon=True)
        thread.start()
        return thread

    # Hold the state file's row, so the write stops after its epoch check (the key row
    # held FOR SHARE) — a write in flight, for as long as this transaction lasts.
    with psycopg.connect(postgres_url) as blocker:
        blocker.execute(
            "SELECT 1 FROM fd_files WHERE space = %s AND run_id = %s FOR UPDATE",
            (pg_store.space, RUN_A),
        )
        write = run("write", lambda: writer.write_file("k", old, RUN_A, "state.json", b'{"n":1}'))
        wait_for(lambda: _waiting_on_lock(pg_store, "fd_write_file"))
        bump = run("bump", lambda: fencer.fence("k"))
        wait_for(lambda: _waiting_on_lock(pg_store, "fd_bump"))
        assert "bump" not in results  # the bump waits for the write in flight
        blocker.rollback()
    write.join(10)
    bump.join(10)
    assert results == {"write": None, "bump": old + 1}
    assert pg_store.read_file(RUN_A, "state.json") == b'{"n":1}'
    with pytest.raises(Fenced):
        writer.write_file("k", old, RUN_A, "state.json", b'{"n":2}')
    assert pg_store.read_file(RUN_A, "state.json") == b'{"n":1}'
    writer.close()
    fencer.close()


def test_reap_fences_and_clears_liveness(pg_store: PostgresStore) -> None:
    """The reaper: the lost run (and the runs its process held for called keys) read as
    not live, and its writer is fenced."""
    epoch = pg_store.claim("top", worker="w1")
    pg_store.publish("top", epoch, RUN_A, {"state.json": b"{}"})
    pg_store.publish("top", epoch, RUN_B, {"state.json": b"{}"})  # run.call under another key
    pg_store.set_live("top", epoch, RUN_A, worker="w1", host="hostA", pid=77)
    live = pg_store.live_runs()
    assert set(live) == {RUN_A, RUN_B}
    assert live[RUN_A]["worker"] == "w1" and live[RUN_A]["pid"] == 77
    assert pg_store.reap("top", RUN_A) == epoch + 1
    assert pg_store.live_runs() == {}
    with pytest.raises(Fenced):
        pg_store.write_file("top", epoch, RUN_A, "state.json", b"{}")
    assert pg_store.claim("top", worker="w2") == epoch + 2  # the key is free again
    kinds = [c.kind for c in pg_store.changes_after(0)]
    assert kinds.count("live") == 3  # set_live, then one per run the reap ended


def test_a_late_reap_of_a_lost_holder_leaves_a_later_claims_run_alone(
    pg_store: PostgresStore,
) -> None:
    """Guards the partition case: the reap of worker A's epoch, run again late (a
    workflow task the cut-off worker ran once it was back), must not fence out or end
    the run worker B started under a later claim."""
    lost = pg_store.claim("k", worker="a")
    pg_store.publish("k", lost, RUN_A, {"state.json": b"{}"})
    pg_store.set_live("k", lost, RUN_A, worker="a", host="hostA", pid=1)
    assert pg_store.reap("k", RUN_A, lost) == lost + 1  # the first reap: A is out
    later = pg_store.claim("k", worker="b")
    pg_store.publish("k", later, RUN_B, {"state.json": b"{}"})
    pg_store.set_live("k", later, RUN_B, worker="b", host="hostB", pid=2)
    assert pg_store.reap("k", RUN_A, lost) == later  # late: nothing changes
    assert set(pg_store.live_runs()) == {RUN_B}
    pg_store.write_file("k", later, RUN_B, "state.json", b'{"n":1}')  # B still writes
    with pytest.raises(Fenced):
        pg_store.write_file("k", lost, RUN_A, "state.json", b"{}")


def test_delete_never_removes_a_live_run(pg_store: PostgresStore) -> None:
    """Guards prune against deleting a run another machine is writing."""
    ended = pg_store.claim("k", worker="w1")
    pg_store.publish("k", ended, RUN_A, {"cycle.jsonl": b"a\n"})
    pg_store.clear_live("k", ended, RUN_A)
    running = pg_store.claim("k", worker="w1")
    pg_store.publish("k", running, RUN_B, {"cycle.jsonl": b"b\n"})
    pg_store.set_live("k", running, RUN_B, worker="w1", host="h", pid=1)

    unknown = "20261130T120002.000Z-cccccc"
    assert pg_store.delete_runs([RUN_A, RUN_B, unknown]) == [RUN_A]
    assert pg_store.read_file(RUN_A, "cycle.jsonl") is None
    assert pg_store.read_file(RUN_B, "cycle.jsonl") == b"b\n"
    assert pg_store.run_ids() == [RUN_B]
    feed = pg_store.changes_after(0)
    assert [c.kind for c in feed if c.run_id == RUN_A] == ["delete"]  # the rest superseded
    assert pg_store.delete_runs([]) == []
    pg_store.reap("k", RUN_B)
    assert pg_store.delete_runs([RUN_B]) == [RUN_B]
    assert pg_store.run_ids() == []


def test_appends_keep_byte_offsets_and_a_resent_append_lands_once(pg_store: PostgresStore) -> None:
    """A write resent after a lost answer must not duplicate a line; other bytes at a
    taken offset are refused; a gap hides what follows it until it is filled."""
    epoch = pg_store.claim("k", worker="w1")
    pg_store.publish("k", epoch, RUN_A, {"cycle.jsonl": b"created\n"})
    assert pg_store.append_line("k", epoch, RUN_A, "cycle.jsonl", b"one\n", offset=8) == 8
    assert pg_store.append_line("k", epoch, RUN_A, "cycle.jsonl", b"one\n", offset=8) == 8
    assert pg_store.append_line("k", epoch, RUN_A, "cycle.jsonl", b"two\n") == 12
    with pytest.raises(StoreConflictError) as taken:
        pg_store.append_line("k", epoch, RUN_A, "cycle.jsonl", b"ONE\n", offset=8)
    assert "already appended at byte 8" in taken.value.message
    # committed out of order: byte 21 before byte 16
    pg_store.append_line("k", epoch, RUN_A, "cycle.jsonl", b"four\n", offset=21)
    assert pg_store.read_file(RUN_A, "cycle.jsonl") == b"created\none\ntwo\n"
    pg_store.append_line("k", epoch, RUN_A, "cycle.jsonl", b"three", offset=16)
    assert pg_store.read_file(RUN_A, "cycle.jsonl") == b"created\none\ntwo\nthreefour\n"
    assert pg_store.read_file(RUN_A, "cycle.jsonl", 10) == b"e\ntwo\nthreefour\n"
    assert pg_store.read_file(RUN_A, "cycle.jsonl", 3) == b"ated\none\ntwo\nthreefour\n"
    # a whole write replaces what was appended before it
    pg_store.write_file("k", epoch, RUN_A, "cycle.jsonl", b"fresh\n")
    assert pg_store.append_line("k", epoch, RUN_A, "cycle.jsonl", b"x\n") == 6
    assert pg_store.read_file(RUN_A, "cycle.jsonl") == b"fresh\nx\n"
    assert pg_store.relpaths(RUN_A) == ["cycle.jsonl"]


def test_schema_is_idempotent_and_safe_from_many_processes(
    pg_store: PostgresStore, postgres_url: str
) -> None:
    """Every worker ensures the schema at start; none may fail or lose rows."""
    epoch = pg_store.claim("k", worker="w1")
    pg_store.publish("k", epoch, RUN_A, {"state.json": b"{}"})
    stores = [PostgresStore(postgres_url, pg_store.space) for _ in range(4)]
    errors: list[BaseException] = []

    def ensure(store: PostgresStore) -> None:
        try:
            store.ensure_schema()
            store.ensure_schema()
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=ensure, args=(s,)) for s in stores]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    for store in stores:
        store.close()
    assert errors == []
    assert pg_store.read_file(RUN_A, "state.json") == b"{}"
    assert pg_store.key_epoch("k") == epoch
    assert pg_store._rows("SELECT count(*) FROM fd_schema", ())[0][0] == 1


def test_spaces_do_not_see_each_other(pg_store: PostgresStore, postgres_url: str) -> None:
    other = PostgresStore(postgres_url, pg_store.space + "-other")
    try:
        assert pg_store.claim("k", worker="w") == 1
        assert other.claim("k", worker="w") == 1
        other.publish("k", 1, RUN_A, {"state.json": b"{}"})
        assert pg_store.run_ids() == [] and pg_store.changes_after(0) == []
        assert other.run_ids() == [RUN_A]
    finally:
        other.drop_space()
        other.close()


def test_a_broken_connection_is_reported_and_the_next_call_reconnects(
    pg_store: PostgresStore,
) -> None:
    """Guards the mirror's retry: a dropped connection is an error it can retry, not a hang."""
    epoch = pg_store.claim("k", worker="w")
    pid = pg_store._connection().info.backend_pid
    killer = second_writer(pg_store)
    killer._rows("SELECT pg_terminate_backend(%s)", (pid,))
    killer.close()
    time.sleep(0.1)
    with pytest.raises(StoreUnreachableError):
        pg_store.write_file("k", epoch, RUN_A, "state.json", b"{}")
    pg_store.write_file("k", epoch, RUN_A, "state.json", b"{}")  # reconnected
    assert pg_store.read_file(RUN_A, "state.json") == b"{}"


def test_an_unreachable_server_is_named_without_its_password() -> None:
    store = PostgresStore(f"postgresql://u:secret@127.0.0.1:{free_port()}/db", "s")
    with pytest.raises(StoreUnreachableError) as down:
        store.claim("k", worker="w")
    assert "127.0.0.1" in down.value.message and "secret" not in down.value.message
    assert down.value.code == "STORE_UNREACHABLE"


def test_a_store_on_a_database_without_the_schema_says_so(postgres_url: str) -> None:
    """A refusal that no retry mends is a StoreError naming it, not a traceback."""
    import psycopg as pg

    with pg.connect(postgres_url, autocommit=True) as admin:
        admin.execute("CREATE DATABASE empty_for_store_test")
    try:
        store = PostgresStore(postgres_url.rsplit("/", 1)[0] + "/empty_for_store_test", "s")
        with pytest.raises(StoreError) as refused:
            store.changes_after(0)
        assert refused.value.code == "STORE_ERROR" and "fd_changes" in refused.value.message
        store.ensure_schema()  # made there, then cheap
        assert store.changes_after(0) == []
        store.close()
    finally:
        with pg.connect(postgres_url, autocommit=True) as admin:
            admin.execute("DROP DATABASE empty_for_store_test WITH (FORCE)")


def test_a_malformed_url_is_a_usage_error() -> None:
    with pytest.raises(FlowdropError) as bad:
        PostgresStore("host=127.0.0.1 port", "s").claim("k", worker="w")
    assert bad.value.code == "USAGE" and "PostgreSQL URL" in bad.value.message


def test_the_fixture_finds_postgresql_off_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """Debian keeps initdb in /usr/lib/postgresql/<v>/bin, not on PATH (CI's case)."""
    import glob

    from tests.remote.servers import find_pg_binary

    if not glob.glob("/usr/lib/postgresql/*/bin/initdb"):
        pytest.skip("no Debian PostgreSQL layout on this machine")
    monkeypatch.setenv("PATH", "/nonexistent")
    assert find_pg_binary("initdb").startswith("/usr/lib/postgresql/")


def test_the_feed_keeps_one_row_per_file_not_one_per_key_set(pg_store: PostgresStore) -> None:
    """A long run sets keys all day: its state.json's older change rows are superseded
    (a replica behind them reads the newest whole file), appends each keep theirs."""
    epoch = pg_store.claim("k", worker="w")
    pg_store.publish("k", epoch, RUN_A, {"state.json": b"{}", "cycle.jsonl": b""})
    for n in range(50):
        pg_store.write_file("k", epoch, RUN_A, "state.json", b'{"n":%d}' % n)
        pg_store.append_line("k", epoch, RUN_A, "cycle.jsonl", b"%d\n" % n)
    kinds = [c.kind for c in pg_store.changes_after(0)]
    assert kinds.count("file") == 1 and kinds.count("line") == 50
    assert pg_store.read_file(RUN_A, "state.json") == b'{"n":49}'


def test_a_schema_made_before_the_feed_was_compacted_is_brought_up_to_date(
    pg_store: PostgresStore,
) -> None:
    """ensure_schema on a database whose fd_files has no change_id yet (the first
    version): the column is added, nothing is lost."""
    epoch = pg_store.claim("k", worker="w")
    pg_store.publish("k", epoch, RUN_A, {"state.json": b"{}"})
    conn = pg_store._connection()
    # only this test's space is in its own rows; the column is shared: put it back after
    with conn.transaction():
        conn.execute("LOCK TABLE fd_files IN ACCESS EXCLUSIVE MODE")
        conn.execute("ALTER TABLE fd_files DROP COLUMN change_id")
        conn.execute("UPDATE fd_schema SET version = 1")
        fresh = PostgresStore(pg_store.url, pg_store.space)
        fresh._conn = conn  # inside this transaction: no other test sees the old schema
        fresh.ensure_schema()
    assert pg_store._rows("SELECT version FROM fd_schema", ()) == [(SCHEMA_VERSION,)]
    pg_store.write_file("k", epoch, RUN_A, "state.json", b'{"n":1}')
    assert pg_store.read_file(RUN_A, "state.json") == b'{"n":1}'
