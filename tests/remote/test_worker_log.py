"""A worker's log, read long after by a person: plain text (no terminal colour), a
UTC time on every line, a repeated SDK warning once a minute, one line per expected
event (an activity cancelled by its heartbeat timeout through a Temporal outage),
a traceback only for what nobody expected (issue 38 item 11)."""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Iterator
from io import StringIO
from pathlib import Path

import pytest

from flowdrop_tui.core.remote.daemon.worker_log import PlainFormatter, Repeats
from flowdrop_tui.core.remote.remote_errors import Fenced
from tests.remote.cluster import COUNTER, Cluster, make_client, wait_for
from tests.remote.temporal_server import DevServer

OUTAGE = 15.0  # seconds Temporal is down: the scenario, not a synchronisation
STAMP = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ ")


@pytest.fixture
def own_temporal(tmp_path: Path) -> Iterator[DevServer]:
    server = DevServer(tmp_path / "temporal").start()
    try:
        yield server
    finally:
        server.stop()


@pytest.mark.slow
def test_a_temporal_outage_leaves_a_few_plain_stamped_lines(
    own_temporal: DevServer, postgres_url: str, space: str, tmp_path: Path
) -> None:
    """Guards ~40 coloured lines for a 15 s outage (each poller's every retry, with the
    gRPC client's dump) and a traceback for the run's activity cancelled by its
    heartbeat timeout, which the worker expects (it keeps the run and is attended)."""
    cluster = Cluster(own_temporal.info.address, postgres_url, tmp_path / "cluster")
    try:
        worker = cluster.start_worker("a", max_runs=1)
        worker.wait_polling()
        client = make_client(cluster, space, tmp_path)
        client.add_flow("counter", COUNTER)
        run = client.json("run", "counter")["run"]
        wait_for("live", lambda: client.json("show", run)["status"] == "running")
        own_temporal.stop()
        down_at = time.monotonic()
        while time.monotonic() - down_at < OUTAGE:
            time.sleep(0.5)
        own_temporal.start()
        wait_for(
            "stop --now taken after the outage",
            lambda: client.cli("stop", run, "--now", "--json", check=False).returncode == 0,
            timeout=120,
        )
        wait_for("cancelled", lambda: client.json("show", run)["status"] == "cancelled")
        worker.stop()
    finally:
        cluster.stop()
    text = worker.text()
    lines = text.splitlines()
    print(f"worker log through a {OUTAGE:.0f} s Temporal outage: {len(lines)} lines")
    assert "\x1b[" not in text and "Traceback" not in text, text
    for line in lines:
        assert STAMP.match(line), line
    assert any("retried" in line for line in lines), text  # the outage is still said
    assert "tonic::transport" not in text
    sdk = [line for line in lines if "worker a" not in line]
    kinds = {re.sub(r"\d+", "#", STAMP.sub("", line)) for line in sdk}
    assert len(sdk) == len(kinds), text  # each kind once in the minute
    cancelled = [line for line in lines if "Completing activity as failed" in line]
    assert len(cancelled) <= 1 and all("CancelledError" in line for line in cancelled)


def log_of(*records: logging.LogRecord) -> str:
    out = StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(PlainFormatter())
    handler.addFilter(Repeats())
    for record in records:
        handler.handle(record)
    return out.getvalue()


def record(message: str, exc: BaseException | None = None) -> logging.LogRecord:
    info = (type(exc), exc, exc.__traceback__) if exc is not None else None
    return logging.LogRecord("temporalio.activity", logging.WARNING, "x", 1, message, None, info)


def raised(exc: BaseException) -> BaseException:
    try:
        raise exc
    except BaseException as caught:
        return caught


def test_expected_errors_are_one_line_and_unexpected_ones_keep_their_traceback() -> None:
    """Guards a fenced run (``Fenced``) logged with a traceback, and an unexpected error
    losing its own."""
    fenced = log_of(record("Completing activity as failed", raised(Fenced("fenced out: x"))))
    assert fenced.count("\n") == 1 and "Fenced: fenced out: x" in fenced, fenced
    assert STAMP.match(fenced)
    broken = log_of(record("Completing activity as failed", raised(KeyError("boom"))))
    assert "Traceback" in broken and "KeyError: 'boom'" in broken


def test_a_repeated_warning_is_said_once_a_minute_and_colour_is_dropped() -> None:
    """Guards one line per retry per poller, in terminal colours."""
    dump = (
        "\x1b[33mgRPC call poll_activity_task_queue retried {} times\x1b[0m error=Status {{ "
        'code: Unavailable, message: "tcp connect error", source: Some(tonic::transport) }}'
    )
    text = log_of(*(record(dump.format(n)) for n in range(1, 30)))
    lines = text.splitlines()
    assert len(lines) == 1, text
    assert "\x1b" not in text and "tonic" not in text
    assert lines[0].endswith("retried 1 times error=Unavailable: tcp connect error"), lines[0]
    field = "gRPC call x retried 5 times {'error': 'Status { code: Unavailable, message: \"e\" }'}"
    assert log_of(record(field)).endswith("{'error': 'Unavailable: e'}\n")
