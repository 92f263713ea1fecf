"""Hostile flows and records that used to wedge or crash the engine (issue 10, items
10–15, 17, 18): each case through the real command, with real files and processes."""

from __future__ import annotations

from pathlib import Path

import orjson

from tests.conftest import CLI, events, wait_for, write_flow

ONE_ROUND = """
    from flowdrop_tui import flow

    @flow(resumable=True)
    def main(run):
        for r in run.rounds(range(1)):
            run.state["n"] = 1
        return "ok"
"""


def nested(depth: int) -> str:
    """A JSON list nested ``depth`` levels deep."""
    return "[" * depth + "]" * depth


def only_run(ws: Path) -> str:
    runs = sorted(p.name for p in (ws / ".flowdrop" / "runs").iterdir() if p.name[0] != ".")
    assert runs, "no run was made"
    return runs[-1]


# -- item 13: a state nested deeper than the writer's limit -------------------------------------


def test_a_state_nested_hundreds_of_levels_is_refused_naming_the_file(
    workspace: Path, cli: CLI
) -> None:
    """Guards against tracebacks (exit 1) from `run`, `snapshot` and `show` when a
    run's state.json nests 255–490 levels deep: orjson reads it, then cannot write it."""
    write_flow(workspace, "deep", ONE_ROUND)
    cli("run", "deep", check=0)
    run_id = only_run(workspace)
    state = workspace / ".flowdrop" / "runs" / run_id / "state.json"
    for depth in (300, 490):
        state.write_text('{"deep": {"x": ' + nested(depth) + "}}")
        before = state.read_bytes()
        for args in (("run", "deep"), ("snapshot", run_id)):
            done = cli(*args, check=3)
            assert "Traceback" not in done.stderr
            assert str(state) in done.stderr and "levels deep" in done.stderr
        shown = cli.json("show", run_id)  # show still shows the run, saying why not its state
        assert shown["state"] is None and str(state) in shown["state_error"]
        assert "Traceback" not in cli("show", run_id, check=0).stderr
        assert state.read_bytes() == before  # left as it is
    assert len(list((workspace / ".flowdrop" / "runs").iterdir())) == 1  # no run was made


def test_a_snapshot_nested_hundreds_of_levels_is_refused_naming_the_file(
    workspace: Path, cli: CLI, tmp_path: Path
) -> None:
    """Guards against `run --snapshot` crashing with a traceback on a deep snapshot."""
    write_flow(workspace, "deep", ONE_ROUND)
    snap = tmp_path / "deep.json"
    for depth in (260, 480):
        snap.write_text('{"status": null, "data": {"x": ' + nested(depth) + "}}")
        done = cli("run", "deep", "--snapshot", str(snap), check=3)
        assert "Traceback" not in done.stderr and str(snap) in done.stderr
    assert not (workspace / ".flowdrop" / "runs").exists() or not list(
        (workspace / ".flowdrop" / "runs").iterdir()
    )


def test_a_forged_record_nested_past_the_writer_limit_is_still_shown(
    workspace: Path, cli: CLI
) -> None:
    """Guards against `show --json` crashing on a result nested deeper than orjson writes."""
    write_flow(workspace, "deep", ONE_ROUND)
    cli("run", "deep", check=0)
    run_id = only_run(workspace)
    cycle = workspace / ".flowdrop" / "runs" / run_id / "cycle.jsonl"
    lines = cycle.read_bytes().splitlines()
    ended = orjson.loads(lines[-1])
    assert ended["event"] == "ended"
    raw = orjson.dumps(ended).decode().replace('"result":"ok"', '"result":' + nested(600))
    cycle.write_bytes(b"\n".join(lines[:-1]) + b"\n" + raw.encode() + b"\n")
    shown = cli.json("show", run_id)
    assert shown["status"] == "completed" and isinstance(shown["result"], list)


# -- item 12: a detached run that prints a lot before it answers --------------------------------


def test_detach_returns_when_the_run_prints_more_than_a_pipe_holds_before_answering(
    workspace: Path, cli: CLI
) -> None:
    """Guards against `run --detach` deadlocking (120 s, then "exit status -9") when
    the run's process printed 64 KiB or more (a chatty import) before its handshake."""
    write_flow(
        workspace,
        "chatty",
        """
        import sys
        from flowdrop_tui import flow

        sys.stdout.write("x" * 300_000 + "\\n")
        sys.stdout.flush()
        sys.stderr.write("y" * 100_000 + "\\n")

        @flow()
        def main(run):
            return "done"
        """,
    )
    done = cli("run", "chatty", "--detach", "--json", timeout=60, check=0)
    run_id = orjson.loads(done.stdout)["run"]
    wait_for(lambda: any(e["event"] == "ended" for e in events(workspace, run_id)))
    assert [e["outcome"] for e in events(workspace, run_id) if e["event"] == "ended"] == [
        "completed"
    ]
