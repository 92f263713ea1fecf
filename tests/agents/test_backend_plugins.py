"""More backends plug in through the `flowdrop_tui.backends` entry-point group (SPEC §9).

The plugin here is installed for real: a module and its `.dist-info` (with
`entry_points.txt`) in a folder on the run's `PYTHONPATH`, which is how an
installed distribution is found by `importlib.metadata`.
"""

from __future__ import annotations

import os
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import CLI, events, state_of

# The README's example backend, as a plugin author would ship it.
PLUGIN = """
from flowdrop_tui.core.sessions import Reply, Session


class EchoBackend:
    name = "echo"

    def run(self, session: Session, prompt: str, options: dict) -> Reply:
        transcript = session.transcripts / f"{session.id}.txt"
        transcript.write_text(f"{prompt} ({options.get('loud', False)})")
        session.link(transcript)
        return Reply(exit_code=0, text=prompt.upper() if options.get("loud") else prompt)
"""


def install(site: Path, dist: str, module: str, source: str, entry_points: str) -> None:
    (site / f"{module}.py").write_text(textwrap.dedent(source))
    info = site / f"{dist}-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(textwrap.dedent(entry_points))


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "site"
    folder.mkdir()
    monkeypatch.setenv(
        "PYTHONPATH", os.pathsep.join(filter(None, [str(folder), os.environ.get("PYTHONPATH")]))
    )
    return folder


def test_an_installed_entry_point_backend_runs_and_links_its_transcript(
    cli: CLI, workspace: Path, flow_writer: Callable[[str, str], Path], site: Path
) -> None:
    """A backend found only through its entry point opens a session like a built-in one."""
    install(
        site,
        "flowdrop-echo",
        "flowdrop_echo",
        PLUGIN,
        """
        [flowdrop_tui.backends]
        echo = flowdrop_echo:EchoBackend
        """,
    )
    flow_writer(
        "shout",
        """
        from flowdrop_tui import flow

        @flow()
        def main(run):
            return run.session("echo", "hello", loud=True).text
        """,
    )
    cli("run", "shout", check=0)
    run_id = str(cli.json("runs", "shout")[0]["run"])
    detail = cli.json("show", run_id)
    assert detail["result"] == "HELLO"
    [row] = detail["sessions"]
    assert row["backend"] == "echo" and row["link"] == "sessions/000001-echo.txt"
    assert row["exists"] is True and Path(row["target"]).read_text() == "hello (True)"
    kinds = [e["event"] for e in events(workspace, run_id) if e["event"].startswith("session_")]
    assert kinds == ["session_opened", "session_closed"]


def test_a_broken_entry_point_is_a_clear_error(
    cli: CLI, workspace: Path, flow_writer: Callable[[str, str], Path], site: Path
) -> None:
    """A plugin that cannot load fails the session with a message naming the entry point,
    and the unknown-backend message lists the backends that are installed."""
    install(
        site,
        "flowdrop-broken",
        "flowdrop_broken",
        "raise ImportError('needs a library that is not installed')\n",
        """
        [flowdrop_tui.backends]
        broken = flowdrop_broken:Backend
        """,
    )
    flow_writer(
        "tries",
        """
        from flowdrop_tui import flow, FlowdropError

        @flow()
        def main(run):
            said = []
            for name in ("broken", "missing"):
                try:
                    run.session(name, "x")
                except FlowdropError as exc:
                    said.append(str(exc))
            run.state["said"] = said
        """,
    )
    cli("run", "tries", check=0)
    run_id = str(cli.json("runs", "tries")[0]["run"])
    broken, missing = state_of(workspace, run_id)["tries"]["said"]
    assert "broken = flowdrop_broken:Backend" in broken
    assert "needs a library that is not installed" in broken
    assert "unknown session backend 'missing'" in missing
    assert all(name in missing for name in ("broken", "claude", "codex", "command"))


METERED = """
from flowdrop_tui.core.sessions import Reply, Session, Usage


class MeteredBackend:
    name = "metered"

    def run(self, session: Session, prompt: str, options: dict) -> Reply:
        session.open(command=f"metered {prompt}")
        if prompt == "as-dict":
            usage = {"input": 7, "output": 3, "cache_read": 2, "cache_write": 1}
            return Reply(0, prompt, usage=usage)
        if prompt == "bad":
            return Reply(0, prompt, usage={"input": -1, "output": "x"})
        return Reply(0, prompt, usage=Usage(input=100, output=20, cache_read=60))
"""


def test_a_plugged_in_backend_reports_usage_in_its_reply(
    cli: CLI, workspace: Path, flow_writer: Callable[[str, str], Path], site: Path
) -> None:
    """A backend that knows its usage returns it in the Reply (a Usage, or its JSON shape);
    it is recorded per session and added up for the run. A malformed one is no usage."""
    install(
        site,
        "flowdrop-metered",
        "flowdrop_metered",
        METERED,
        """
        [flowdrop_tui.backends]
        metered = flowdrop_metered:MeteredBackend
        """,
    )
    flow_writer(
        "spend",
        """
        from flowdrop_tui import flow

        @flow()
        def main(run):
            used = [run.session("metered", p).usage for p in ("usage", "as-dict", "bad")]
            return [u.to_json() if u else None for u in used]
        """,
    )
    cli("run", "spend", check=0)
    run_id = str(cli.json("runs", "spend")[0]["run"])
    detail = cli.json("show", run_id)
    first = {"input": 100, "output": 20, "cache_read": 60, "cache_write": 0}
    second = {"input": 7, "output": 3, "cache_read": 2, "cache_write": 1}
    assert detail["result"] == [first, second, None]
    assert [s["usage"] for s in detail["sessions"]] == [first, second, None]
    assert detail["usage"] == {"input": 107, "output": 23, "cache_read": 62, "cache_write": 1}
    assert cli.json("runs", "spend")[0]["usage"] == detail["usage"]
    assert "107 in (62 cache read, 1 cache write), 23 out" in cli("show", run_id).stdout
    listed = cli("runs", "spend", check=0).stdout.splitlines()
    assert listed[0].endswith("USAGE") and listed[1].endswith("107/23")
