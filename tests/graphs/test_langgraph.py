"""SPEC §22: ``FlowdropSaver``, a LangGraph checkpointer on flowdrop's records.

LangGraph's own conformance suite (all 81 tests, every capability detected and passed),
then what it does not test: the sync API, real graphs, ``interrupt()`` in one process
resumed in another, kill -9 during ``put``, two processes on one thread, stop, and
prune keeping what a ``DeltaChannel`` needs. Needs the ``langgraph`` extra (the test
extra carries it); outside CI a missing extra skips, saying so, and
FLOWDROP_REQUIRE_LANGGRAPH=1 (``.ci/run``) makes it a failure.
"""

from __future__ import annotations

import fcntl
import itertools
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Annotated, Any, TypedDict

import orjson
import pytest

if not os.environ.get("FLOWDROP_REQUIRE_LANGGRAPH"):
    pytest.importorskip("langgraph.checkpoint.conformance", reason="pip install -e '.[langgraph]'")

from langgraph.channels.delta import DeltaChannel
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.graph import START, StateGraph

from flowdrop_tui.core.errors import InvalidNameError, NotFoundError
from flowdrop_tui.core.paths import Layout
from flowdrop_tui.core.records.run_record.run_fold import load_run
from flowdrop_tui.langgraph import FlowdropSaver
from flowdrop_tui.langgraph.thread_log import ThreadLog
from tests.conftest import CLI, REPO, events, state_of, wait_for

CHILD = [sys.executable, "-m", "tests.graph_child"]


def child(ws: Path, *args: str, **kw: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CHILD, str(ws), *args], cwd=REPO, capture_output=True, text=True, timeout=120, **kw
    )


def config(thread: str, checkpoint_id: str | None = None) -> Any:
    configurable = {"thread_id": thread, "checkpoint_ns": ""}
    if checkpoint_id:
        configurable["checkpoint_id"] = checkpoint_id
    return {"configurable": configurable}


def runs_of(ws: Path, key: str) -> list[dict[str, Any]]:
    return CLI(ws).json("runs", key)  # type: ignore[no-any-return]


def live_run(ws: Path, key: str) -> dict[str, Any] | None:
    """The key's running run, once there is one (None before its first checkpoint)."""
    done = CLI(ws)("runs", key, "--json")
    if done.returncode != 0:
        return None
    return next((r for r in orjson.loads(done.stdout) if r["status"] == "running"), None)


async def test_conformance_suite_passes_every_capability(tmp_path: Path) -> None:
    """LangGraph's suite, as a new user runs it: 8 capabilities detected, 81 tests passed."""
    savers: list[FlowdropSaver] = []

    @checkpointer_test(name="FlowdropSaver")
    async def flowdrop_saver() -> Any:
        folder = tmp_path / f"ws{len(savers)}"  # a fresh workspace per capability
        folder.mkdir()
        saver = FlowdropSaver(workspace=folder)
        savers.append(saver)
        yield saver
        saver.close()

    report = await validate(flowdrop_saver)
    results = report.results
    assert set(results) == {
        "put", "put_writes", "get_tuple", "list", "delete_thread",
        "delete_for_runs", "copy_thread", "prune",
    }  # fmt: skip
    failures = {cap: r.failures for cap, r in results.items() if r.failures}
    assert not failures, failures
    assert all(r.detected and r.passed for r in results.values()), results
    assert sum(r.tests_passed for r in results.values()) == 81
    assert sum(r.tests_failed for r in results.values()) == 0


def test_sync_api_round_trips_checkpoints_writes_and_deletes(tmp_path: Path) -> None:
    saver = FlowdropSaver(workspace=tmp_path, record_runs=False)
    stored = []
    parent = config("t1")
    for n in range(3):
        checkpoint = empty_checkpoint()
        checkpoint["channel_values"] = {"n": n, "raw": b"\x00\xff", "none": None}
        checkpoint["channel_versions"] = {"n": n + 1, "raw": 1, "none": 1}
        versions = {"n": n + 1, **({"raw": 1, "none": 1} if n == 0 else {})}
        parent = saver.put(parent, checkpoint, {"source": "loop", "step": n}, versions)
        stored.append(parent)
    saver.put_writes(stored[-1], [("a", 1), ("b", {"x": [1, 2]})], "task-1", "path")
    saver.put_writes(stored[-1], [("a", 1)], "task-1")  # a retried task: kept once

    latest = saver.get_tuple(config("t1"))
    assert latest is not None
    assert latest.checkpoint["channel_values"] == {"n": 2, "raw": b"\x00\xff", "none": None}
    assert latest.parent_config == stored[1]
    assert [(w[1], w[2]) for w in latest.pending_writes or []] == [("a", 1), ("b", {"x": [1, 2]})]
    listed = list(saver.list(config("t1")))
    assert [t.metadata["step"] for t in listed] == [2, 1, 0]
    assert [t.metadata["step"] for t in saver.list(None, filter={"step": 1})] == [1]
    assert len(list(saver.list(config("t1"), before=stored[1], limit=5))) == 1

    saver.copy_thread("t1", "t2")
    assert [t.checkpoint["id"] for t in saver.list(config("t2"))] == [
        t.checkpoint["id"] for t in listed
    ]
    saver.prune(["t2"], strategy="keep_latest")
    (kept,) = saver.list(config("t2"))
    assert kept.checkpoint["channel_values"]["raw"] == b"\x00\xff"  # a blob an older one brought
    saver.delete_thread("t1")
    assert saver.get_tuple(config("t1")) is None
    assert saver.get_tuple(config("t2")) is not None
    # another saver (another process would do the same) reads what this one wrote
    assert FlowdropSaver(workspace=tmp_path).get_tuple(config("t2")) is not None


def test_bad_inputs_are_refused_clearly(tmp_path: Path) -> None:
    saver = FlowdropSaver(workspace=tmp_path, record_runs=False)
    for bad in ("../escape", "", "a//b", "/abs", "tab\there"):
        with pytest.raises(InvalidNameError, match="invalid key"):
            saver.get_tuple(config(bad))
    with pytest.raises(ValueError, match="unknown prune strategy"):
        saver.prune(["t"], strategy="keep_some")
    with pytest.raises(NotFoundError, match="is not a folder"):
        FlowdropSaver(workspace=tmp_path / "missing")


def test_the_workspace_is_found_as_the_cli_finds_it(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (workspace / "agents").mkdir()
    monkeypatch.chdir(workspace / "agents")
    assert FlowdropSaver().layout.workspace == workspace.resolve()  # the git top-level
    assert FlowdropSaver(workspace=".").layout.workspace == (workspace / "agents").resolve()


def test_a_graph_run_is_a_flowdrop_run_of_its_thread(workspace: Path) -> None:
    """Rounds are super-steps, state.json the channel values, listed by flows and runs."""
    saver = FlowdropSaver(workspace=workspace)
    from tests.graph_child import review_graph

    graph = review_graph(saver)
    out = graph.invoke({"count": 2, "answer": "", "notes": []}, config("solo"))
    assert "__interrupt__" in out
    saver.close()
    (run,) = runs_of(workspace, "solo")
    assert run["status"] == "paused" and run["flow"] == "solo"
    assert (run["first_round"], run["last_round"]) == (1, 2)  # super-steps 0 and 1, then ask
    assert state_of(workspace, run["run"]) == {
        "solo": {"count": 3, "answer": "", "notes": ["step 3"]}
    }
    names = [e["event"] for e in events(workspace, run["run"])]
    assert names[:2] == ["created", "started"] and names[-1] == "paused"
    flows = {row["name"]: row for row in CLI(workspace).json("flows")}
    assert flows["solo"]["status"] == "paused" and flows["solo"]["path"] == "langgraph"


def test_interrupt_in_one_process_resumes_in_another(workspace: Path) -> None:
    asked = child(workspace, "ask")
    assert asked.returncode == 0 and asked.stdout.strip() == "interrupted", asked.stderr
    (paused,) = runs_of(workspace, "review")
    assert paused["status"] == "paused"
    refused = CLI(workspace).json("resume", paused["run"], check=3)  # no flow to run
    assert refused["error"]["code"] == "SIGNAL_REFUSED"
    assert "Command(resume=" in refused["error"]["message"]
    # The interrupt is the paused run's open question: in the inbox, with how to answer.
    (item,) = CLI(workspace).json("inbox", check=0)
    assert item["kind"] == "gate" and item["run"] == paused["run"] and item["flow"] == "review"
    assert orjson.loads(item["message"])["question"] == "ship it?"  # the interrupt's value
    assert item["command"] == (
        "graph.invoke(Command(resume=ANSWER), {'configurable': {'thread_id': 'review'}})"
    )
    assert CLI(workspace).json("show", paused["run"], check=0)["gate"]["question"]

    answered = child(workspace, "answer", "ship")
    assert answered.returncode == 0, answered.stderr
    assert answered.stdout.strip() == "answer=ship count=3"
    (done,) = runs_of(workspace, "review")  # the same run went on, in its own record
    assert done["run"] == paused["run"] and done["status"] == "completed"
    assert done["last_round"] == paused["last_round"] + 1
    names = [e["event"] for e in events(workspace, done["run"])]
    assert "resumed" in names and names[-1] == "ended"
    assert state_of(workspace, done["run"])["review"]["answer"] == "ship"
    assert CLI(workspace).json("inbox", check=0) == []  # resumed: nothing waits

    again = child(workspace, "ask")  # the thread invoked again: a new run picks up
    assert again.returncode == 0 and again.stdout.strip() == "interrupted", again.stderr
    newest = runs_of(workspace, "review")[0]
    assert newest["picked_up_from"] == done["run"] and newest["status"] == "paused"
    assert newest["first_round"] == done["last_round"] + 1  # round numbers go on

    CLI(workspace)("prune", "--keep", "1", check=0)  # the ended run goes, the paused one stays
    assert [r["run"] for r in runs_of(workspace, "review")] == [newest["run"]]
    final = child(workspace, "answer", "later")  # the thread's checkpoints are all there
    assert final.returncode == 0 and final.stdout.strip() == "answer=later count=3", final.stderr
    assert runs_of(workspace, "review")[0]["status"] == "completed"


def test_kill_9_during_put_leaves_a_consistent_last_checkpoint(workspace: Path) -> None:
    acked = 0
    for round_ in range(4):
        proc = subprocess.Popen(
            [*CHILD, str(workspace), "puts", "crash"],
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert proc.stdout is not None
        target = acked + 2 + round_ * 3
        while acked < target:
            line = proc.stdout.readline()
            assert line.startswith("acked "), (line, proc.stderr.read() if proc.stderr else "")
            acked = int(line.split()[1])
        os.kill(proc.pid, signal.SIGKILL)  # the next put is under way
        proc.wait()
        proc.stdout.close()
        assert proc.stderr is not None
        proc.stderr.close()

        saver = FlowdropSaver(workspace=workspace, record_runs=False)
        latest = saver.get_tuple(config("crash"))
        assert latest is not None
        number = latest.checkpoint["channel_values"]["n"]
        assert number >= acked  # nothing put and answered is lost
        assert latest.checkpoint["channel_values"]["pad"].startswith(f"{number}:")
        chain = [t.checkpoint["channel_values"]["n"] for t in saver.list(config("crash"))]
        assert chain == list(range(number, 0, -1))  # every one whole, each its parent's next
        acked = number
    ids = [r["run"] for r in runs_of(workspace, "crash")]
    assert {r["status"] for r in runs_of(workspace, "crash")} == {"interrupted"}
    info = load_run(Layout(workspace), ids[0])
    assert info.status == "interrupted"


def test_two_processes_on_one_thread_keep_every_line(workspace: Path) -> None:
    procs = [
        subprocess.Popen(
            [*CHILD, str(workspace), "pairs", "shared", tag, "40"],
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for tag in ("a", "b")
    ]
    for proc in procs:
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
    saver = FlowdropSaver(workspace=workspace, record_runs=False)
    listed = list(saver.list(config("shared")))
    assert len(listed) == 80
    for tag in ("a", "b"):
        mine = sorted(
            (t for t in listed if t.metadata["tag"] == tag), key=lambda t: t.metadata["step"]
        )
        assert [t.checkpoint["channel_values"][tag] for t in mine] == list(range(40))
        assert [w[2] for t in mine for w in t.pending_writes or []] == [
            f"{tag}-{i}" for i in range(40)
        ]
        for before, after in itertools.pairwise(mine):  # each its own parent chain
            assert after.parent_config == before.config
    raw = ThreadLog(Layout(workspace), "shared").path.read_bytes()
    assert all(orjson.loads(line) for line in raw.splitlines())  # no torn or mixed line
    for run in runs_of(workspace, "shared"):  # whoever held the key ended its run
        assert run["status"] == "completed"


def test_a_new_threads_name_file_is_written_under_its_lock(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two processes opening one new thread at once both wrote its ``thread`` file
    through ``write_atomic``'s one temporary name, and one renamed the other's away
    (``FileNotFoundError`` in a CI run of the test above). It is written under the lock."""
    from flowdrop_tui.langgraph import thread_log

    (workspace / ".flowdrop").mkdir(exist_ok=True)
    log = ThreadLog(Layout(workspace), "fresh")
    held: list[bool] = []
    real = thread_log.write_atomic

    def checking(path: Path, data: bytes, **kw: Any) -> None:
        fd = os.open(log.folder / thread_log.LOCK, os.O_RDWR)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            held.append(True)  # another open file description holds it: this write's
        else:
            held.append(False)
        finally:
            os.close(fd)
        real(path, data, **kw)

    monkeypatch.setattr(thread_log, "write_atomic", checking)
    log.append(b'{"line": 1}\n')
    assert held == [True]
    assert (log.folder / thread_log.NAME).read_text() == "fresh"
    log.append(b'{"line": 2}\n')  # the name is there: not written again
    assert held == [True]


def spin(ws: Path, thread: str) -> subprocess.Popen[str]:
    """A graph that loops for ever, in a session of its own (stop --now signals its group)."""
    return subprocess.Popen(
        [*CHILD, str(ws), "spin", thread],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


@pytest.mark.parametrize("now", [False, True], ids=["stop", "stop-now"])
def test_stop_ends_a_graph_run(workspace: Path, now: bool) -> None:
    """stop: taken at the graph's next checkpoint (GraphStopped out of invoke); stop --now:
    SIGINT to the run's group, the graph interrupted at once. Either way: cancelled."""
    proc = spin(workspace, "spinner")
    try:
        run = wait_for(lambda: live_run(workspace, "spinner"))
        refused = CLI(workspace).json("pause", run["run"], check=3)  # a graph pauses itself
        assert refused["error"]["code"] == "SIGNAL_REFUSED", refused
        CLI(workspace)("stop", run["run"], *(["--now"] if now else []), check=0)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    if now:
        assert proc.returncode != 0 and "KeyboardInterrupt" in err, (out, err)
    else:
        assert proc.returncode == 130 and out.startswith("stopped:"), (out, err)
    (stopped,) = runs_of(workspace, "spinner")
    assert stopped["status"] == "cancelled"
    (asked,) = [e for e in events(workspace, run["run"]) if e["event"] == "stop_requested"]
    assert asked["now"] is now and asked["by"]["pid"] > 0  # who asked, from the request


def extend(state: list[int], writes: Any) -> list[int]:
    return [*state, *(x for w in writes for x in w)]


class Counted(TypedDict):
    n: int
    seen: Annotated[list[int], DeltaChannel(extend, snapshot_frequency=4)]


def test_prune_keeps_what_a_delta_channel_needs(tmp_path: Path) -> None:
    def tick(state: Counted) -> dict[str, Any]:
        return {"n": state["n"] + 1, "seen": [state["n"] + 1]}

    graph = StateGraph(Counted)
    graph.add_node("tick", tick)
    graph.add_edge(START, "tick")
    graph.add_conditional_edges("tick", lambda s: "tick" if s["n"] < 10 else "__end__")
    saver = FlowdropSaver(workspace=tmp_path, record_runs=False)
    app = graph.compile(checkpointer=saver)
    app.invoke({"n": 0, "seen": []}, config("delta"))
    before = app.get_state(config("delta")).values
    assert before["seen"] == list(range(1, 11))
    total = len(list(saver.list(config("delta"))))
    saver.prune(["delta"], strategy="keep_latest")
    kept = len(list(saver.list(config("delta"))))
    assert 1 < kept < total  # back to the nearest snapshot, no further
    fresh = graph.compile(checkpointer=FlowdropSaver(workspace=tmp_path, record_runs=False))
    assert fresh.get_state(config("delta")).values == before


async def test_the_ui_lists_a_graph_thread_beside_the_flows(
    workspace: Path, flow_writer: Any
) -> None:
    """The thread is a row of the flow table (after the flows), its run in the runs pane,
    and reading them says nothing went wrong (the rows were once zipped with the flows)."""
    from tests.flow_bodies import counts_rounds
    from tests.tui.tui_helpers import RecordingApp, settled, until

    flow_writer("alpha", counts_rounds(description="counts"))
    asked = child(workspace, "ask")
    assert asked.returncode == 0, asked.stderr
    (run,) = runs_of(workspace, "review")
    app = RecordingApp(Layout(workspace))
    async with app.run_test(size=(120, 36)) as pilot:
        await until(pilot, lambda: settled(app), what="the first reads")
        table = app.main_screen.flows
        assert str(table.get_cell("review", "status")) == "paused"
        assert str(table.get_cell("review", "round")) == f"round {run['last_round']}"
        table.move_cursor(row=1)
        await until(pilot, lambda: list(app.main_screen.runs.runs) == [run["run"]])
        assert not app.said, app.said


def test_without_the_extra_the_import_says_how_to_get_it() -> None:
    """A user who imports the saver without LangGraph installed is told the extra."""
    code = (
        "import sys\n"
        "sys.modules['langchain_core'] = None\n"
        "sys.modules['langgraph'] = None\n"
        "import flowdrop_tui.langgraph\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=False
    )
    assert done.returncode == 1
    assert "pip install 'flowdrop-tui[langgraph]'" in done.stderr.splitlines()[-1]
