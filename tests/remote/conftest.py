"""Fixtures of the remote tests (marked ``remote``; run them as ``pytest tests/remote``).

The servers (``postgres_server``, ``temporal_server``: one each per test session, per
xdist worker) are in ``tests/conftest.py``, shared with ``tests/contract``.

- ``postgres_url``: that URL on loopback.
- ``space``: a fresh space name for this test (``servers.new_space``).
- ``pg_store``: a ``PostgresStore`` on that space, schema ensured; the space's rows
  are dropped and the connection closed after the test.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from flowdrop_tui.core.remote.postgres.store import PostgresStore
from tests.remote.servers import PostgresServer, new_space

HERE = Path(__file__).parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if HERE in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.remote)


@pytest.fixture
def postgres_url(postgres_server: PostgresServer) -> str:
    return postgres_server.url()


@pytest.fixture
def space() -> str:
    return new_space()


@pytest.fixture
def pg_store(postgres_url: str, space: str) -> Iterator[PostgresStore]:
    store = PostgresStore(postgres_url, space)
    store.ensure_schema()
    try:
        yield store
    finally:
        try:
            store.drop_space()
        finally:
            store.close()


# -- the Temporal side (tests/remote/temporal_server.py, tests/remote/cluster.py) ---------
from tests.remote.cluster import Cluster  # noqa: E402
from tests.remote.temporal_server import TemporalServer  # noqa: E402


@pytest.fixture
def cluster(
    temporal_server: TemporalServer,
    postgres_url: str,
    tmp_path: Path,
) -> Iterator[Cluster]:
    """The shared servers, a task queue for this test alone, and no worker yet
    (``cluster.start_worker(name)``); every worker is stopped after the test."""
    cluster = Cluster(temporal_server.address, postgres_url, tmp_path / "cluster")
    try:
        yield cluster
    finally:
        cluster.stop()
