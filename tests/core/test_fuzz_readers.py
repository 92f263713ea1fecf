"""Fuzzing the readers of every file a user or a crash can leave behind (docs/decisions.md,
"Crash safety and bad input").

Any bytes in ``cycle.jsonl``, ``state.json``, ``index.json`` or a snapshot file
give a value or a clean ``FlowdropError`` — never another exception, which the
CLI would show as a traceback and the UI as a crash. Example counts are kept
modest so the suite stays fast (``FLOWDROP_FUZZ_EXAMPLES`` raises them); each
property also runs its explicit examples.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from flowdrop_tui import TerminalSnapshotError, ensure_resumable, seed_next_turn
from flowdrop_tui.core import views
from flowdrop_tui.core.errors import FlowdropError, UnusableStateError
from flowdrop_tui.core.flows.discovery import FlowInfo
from flowdrop_tui.core.paths import Layout
from flowdrop_tui.core.records.flow_state.snapshot import check_shape, read_snapshot_file
from flowdrop_tui.core.records.flow_state.state import read_states
from flowdrop_tui.core.records.listing import index
from flowdrop_tui.core.records.log.event_lines import parse_lines, read_events, read_first_event
from flowdrop_tui.core.records.run_record.run_fold import derive_status, fold
from flowdrop_tui.core.records.run_record.run_info import RunInfo
from flowdrop_tui.core.run import start_plan

# FLOWDROP_FUZZ_EXAMPLES=5000 for a deep search; CI keeps the default small.
EXAMPLES = int(os.environ.get("FLOWDROP_FUZZ_EXAMPLES", "150"))
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
FUZZ_FILES = settings(FUZZ, max_examples=max(1, EXAMPLES // 2))

RUN_A = "20260101T000000.000Z-aaaaaa"
RUN_B = "20260102T000000.000Z-bbbbbb"

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**64 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12)
    | st.sampled_from([RUN_A, RUN_B, "../../etc", "/abs", "", "k", "paused", "running"])
)
json_values = st.recursive(
    json_scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=10,
)
EVENT_NAMES = [
    "created",
    "started",
    "resumed",
    "round_started",
    "round_ended",
    "call_started",
    "call_ended",
    "warning",
    "stop_requested",
    "pause_requested",
    "paused",
    "ended",
    "session_opened",
    "session_closed",
    "log",
]
FIELDS = [
    "key",
    "flow",
    "round",
    "index",
    "outcome",
    "first_round",
    "position",
    "carried",
    "source",
    "start",
    "pid",
    "git",
    "session",
    "link",
    "target",
    "now",
    "message",
    "t",
]
events = st.builds(
    lambda name, fields: {"t": "2026-01-01T00:00:00.000Z", **fields, "event": name},
    st.sampled_from(EVENT_NAMES),
    st.dictionaries(st.sampled_from(FIELDS), json_values, max_size=6),
)


def _lines(items: list[Any]) -> bytes:
    return b"".join(orjson.dumps(item) + b"\n" for item in items)


cycle_bytes = st.one_of(
    st.binary(max_size=300),
    st.lists(events, max_size=12).map(_lines),
    st.tuples(st.lists(events, max_size=8), st.binary(max_size=40)).map(
        lambda pair: _lines(pair[0]) + pair[1]  # whole events, then a torn tail or junk
    ),
)
json_bytes = st.one_of(st.binary(max_size=200), json_values.map(orjson.dumps))


@pytest.fixture(scope="module")
def ws(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A workspace with one well-formed finished run of key ``k``, reused by every example."""
    root = tmp_path_factory.mktemp("fuzz")
    run = root / ".flowdrop" / "runs" / RUN_A
    run.mkdir(parents=True)
    (run / "cycle.jsonl").write_bytes(
        _lines(
            [
                {"t": "2026-01-01T00:00:00.000Z", "event": "created", "run": RUN_A, "key": "k"}
                | {"flow": "flows/k", "start": "fresh", "source": None, "first_round": 1},
                {"t": "2026-01-01T00:00:01.000Z", "event": "round_started", "key": "k"}
                | {"round": 1, "index": None},
                {"t": "2026-01-01T00:00:02.000Z", "event": "ended", "outcome": "completed"},
            ]
        )
    )
    (run / "state.json").write_bytes(b'{"k": {"n": 1}}')
    yield root


def _assert_event_list(found: list[dict[str, Any]]) -> None:
    assert all(isinstance(e, dict) and isinstance(e.get("event"), str) for e in found)


@FUZZ
@given(raw=cycle_bytes)
@example(raw=b'{"event": "x"}\n{"t": 1, "event": 5}\n\xff\xfe\n[1]\n{"event": "created"')
def test_cycle_parse_and_fold_never_raise(raw: bytes, tmp_path: Path) -> None:
    """Guards every reader of cycle.jsonl (views, index scan, pick-up) against junk and forgery."""
    found = parse_lines(raw)
    _assert_event_list(found)
    info = fold(RUN_A, tmp_path, found)
    assert isinstance(info, RunInfo)
    derive_status(info)  # no live.lock here: a live-looking record reads as interrupted
    assert info.status != "running" and info.status != "pending"
    orjson.dumps(info.summary(), default=str)
    snap = start_plan.snapshot_of(info, {})
    seed_next_turn(snap)
    ensure_resumable_or_refused(snap)


def ensure_resumable_or_refused(snapshot: dict[str, Any]) -> None:
    try:
        ensure_resumable(snapshot, "fuzzed")
    except TerminalSnapshotError as exc:
        assert "fuzzed" in exc.message


@FUZZ_FILES
@given(raw=cycle_bytes)
def test_cycle_file_readers_never_raise(raw: bytes, tmp_path: Path) -> None:
    path = tmp_path / "cycle.jsonl"
    path.write_bytes(raw)
    _assert_event_list(read_events(path))
    first = read_first_event(path)
    assert first is None or isinstance(first.get("event"), str)


@FUZZ_FILES
@given(raw=json_bytes)
@example(raw=b'{"k": {"a": 1}, "j": []}')
@example(raw=b'{"k": {"a": 18446744073709551616}}')
def test_state_reader_gives_states_or_a_clean_refusal(raw: bytes, tmp_path: Path) -> None:
    """Guards INT-15: a state.json that cannot be consumed is refused naming the file."""
    path = tmp_path / "state.json"
    path.write_bytes(raw)
    try:
        states = read_states(path)
    except UnusableStateError as exc:
        assert str(path) in exc.message
        assert path.read_bytes() == raw  # left as it was
        return
    assert isinstance(states, dict) and all(isinstance(v, dict) for v in states.values())


index_entries = st.dictionaries(
    st.sampled_from(["last_run", "source", "status", "round", "flow"]), json_values, max_size=5
)
index_bytes = st.one_of(
    json_bytes,
    st.builds(
        lambda v, keys: orjson.dumps({"v": v, "keys": keys}),
        st.sampled_from([1, 1, 2, "1", None]),
        st.dictionaries(st.sampled_from(["k", "j", "../x"]), index_entries, max_size=3),
    ),
    st.builds(  # well-formed but naming runs that may not exist, or ids that are paths
        lambda last, source, status, round_: orjson.dumps(
            {
                "v": 1,
                "keys": {
                    "k": {"last_run": last, "source": source, "status": status}
                    | {"round": round_, "flow": "flows/k"}
                },
            }
        ),
        st.sampled_from([RUN_A, RUN_B, "../../outside", "", "x"]),
        st.sampled_from([RUN_A, RUN_B, None, "../../outside", 7]),
        st.sampled_from(["completed", "running", "paused", "weird", None, 3]),
        st.one_of(st.integers(-5, 50), st.text(max_size=3), st.none()),
    ),
)


@FUZZ_FILES
@given(raw=index_bytes)
@example(raw=b'{"v": 1, "keys": {"k": {"last_run": "x", "source": 3, "round": "abc"}}}')
@example(raw=b'{"v": 1, "keys": {"k": {"last_run": "../../outside", "source": null}}}')
@example(raw=b'{"v": 1, "keys": {"k": {"last_run": "%s", "round": "abc"}}}' % RUN_A.encode())
def test_index_readers_answer_from_the_records_whatever_the_file_says(raw: bytes, ws: Path) -> None:
    """Guards §8: the index is a cache. A garbage, forged, future-version one, or one naming
    a run that is gone, is rebuilt from the records; whatever it holds, no reader crashes.

    (A well-formed index naming runs that exist is trusted, as a cache is: ``reindex``
    is the repair for one edited by hand.)
    """
    layout = Layout(ws)
    layout.index.write_bytes(raw)
    usable = index.read(layout)
    trusted = usable is not None and not index._stale(layout, usable)
    rows = views.flow_rows(layout, [FlowInfo("k", "flows/k", True, "", None)])
    assert isinstance(rows[0]["round"], int)
    layout.index.write_bytes(raw)
    loaded = index.load(layout)
    if not trusted:
        assert loaded == index._scan(layout)
    layout.index.write_bytes(raw)
    entry = index.lookup(layout, "k")
    layout.index.write_bytes(raw)
    try:
        chosen = start_plan.plan(layout, "k", resumable=True)
    except FlowdropError:
        assert trusted
        return
    if not trusted:
        assert entry is not None and (entry["last_run"], entry["source"]) == (RUN_A, RUN_A)
        assert rows[0]["last_run"] == RUN_A and rows[0]["round"] == 1
        assert (chosen.source, chosen.state, chosen.first_round) == (RUN_A, {"n": 1}, 2)


snapshot_values = st.one_of(
    json_values,
    st.fixed_dictionaries(
        {"status": json_values},
        optional={
            "data": json_values,
            "metadata": json_values,
            "messages": json_values,
            "iterationCount": json_values,
            "iterator": json_values,
            "currentNodeId": json_values,
            "runId": json_values,
            "threadId": json_values,
        },
    ),
    st.fixed_dictionaries(
        {"status": st.sampled_from([None, "paused", "interrupted", "completed", "failed"])},
        optional={
            "data": st.dictionaries(st.text(max_size=5), json_values, max_size=3),
            "metadata": st.dictionaries(st.sampled_from(["round", "x"]), json_values, max_size=2),
            "iterationCount": st.integers(-2, 5),
            "iterator": st.one_of(st.none(), st.integers(-2, 5)),
        },
    ),
)


@FUZZ
@given(value=snapshot_values)
@example(value={"status": []})
@example(value={"status": {"a": 1}})
def test_snapshot_shape_check_accepts_or_refuses_cleanly(value: Any) -> None:
    try:
        checked = check_shape(value, "snap.json")
    except UnusableStateError as exc:
        assert "snap.json" in exc.message
        return
    assert isinstance(checked, dict) and "status" in checked
    seed_next_turn(checked)
    ensure_resumable_or_refused(checked)


@FUZZ
@given(value=snapshot_values)
@example(value={"status": ["completed"]})
def test_public_snapshot_rules_never_raise_anything_but_the_refusal(value: Any) -> None:
    """``seed_next_turn``/``ensure_resumable`` take any dict another store may hold."""
    if not isinstance(value, dict):
        return
    seeded = seed_next_turn(value)
    assert isinstance(seeded, dict)
    ensure_resumable_or_refused(value)


@FUZZ_FILES
@given(raw=st.one_of(json_bytes, snapshot_values.map(orjson.dumps)))
def test_start_plan_from_any_snapshot_file_is_a_plan_or_a_clean_refusal(
    raw: bytes, ws: Path
) -> None:
    """Guards ``run --snapshot FILE``: what it cannot use is refused before any run exists."""
    path = ws / "snap.json"
    path.write_bytes(raw)
    try:
        read_snapshot_file(path)
        chosen = start_plan.plan(Layout(ws), "k", resumable=True, snapshot=path)
    except FlowdropError as exc:
        assert str(path) in exc.message
        assert path.read_bytes() == raw
        return
    assert chosen.start == "snapshot" and isinstance(chosen.state, dict)
    assert isinstance(chosen.first_round, int) and chosen.first_round >= 1
    orjson.dumps({"carried": chosen.carried, "position": chosen.position}, default=str)
