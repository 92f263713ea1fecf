"""SPEC §3: flows are described by running them in child processes; broken ones are listed."""

from __future__ import annotations

import textwrap
from pathlib import Path

import orjson
import pytest

from tests.conftest import CLI, write_flow

GOOD = """
    from flowdrop_tui import flow

    @flow(resumable=True, description="good one")
    def main(run):
        return 1
"""

BROKEN = {
    "syntax": (
        "from flowdrop_tui import flow\n\n@flow()\ndef main(run)\n    pass\n",
        "SyntaxError",
        ":4",
    ),
    "raises": (
        "from flowdrop_tui import flow\nx = 1\nraise RuntimeError('no config here')\n",
        "RuntimeError: no config here",
        ":3",
    ),
    "noflow": ("def main(run):\n    return 1\n", "no @flow function", ""),
    "twoflows": (
        "from flowdrop_tui import flow\n\n@flow()\ndef a(run):\n    pass\n\n"
        "@flow()\ndef b(run):\n    pass\n",
        "more than one @flow function (a, b)",
        "",
    ),
    "exits": ("import sys\nsys.exit(3)\n", "SystemExit", ""),
}


def test_flows_lists_each_with_declaration_and_no_rounds_yet(workspace: Path, cli: CLI) -> None:
    write_flow(workspace, "good", GOOD)
    write_flow(workspace, "plain", GOOD.replace("resumable=True, ", ""))
    rows = cli.json("flows")
    assert [r["name"] for r in rows] == ["good", "plain"]
    good = rows[0]
    assert good == {
        "name": "good",
        "by_path": False,  # a thread run by path is a row of its own (True)
        "called_by": None,  # the flow that calls it, when it runs only inside another
        "path": "flows/good",
        "resumable": True,
        "error": None,
        "description": "good one",
        "round": 0,
        "last_run": None,
        "status": None,
        "budget": {
            "rounds": {"limit": None, "used": 0, "left": None},
            "minutes": {"limit": None, "used": 0.0, "left": None},
            "tokens": {"limit": None, "used": 0, "left": None},
        },
        "usage": None,  # no session has reported any
        "lane": None,  # a lane's row names its lane (SPEC §23)
    }
    assert rows[1]["resumable"] is False
    text = cli("flows", check=0).stdout
    assert "no rounds yet" in text


def test_broken_flows_are_listed_with_file_line_and_message_and_hide_nothing(
    workspace: Path, cli: CLI
) -> None:
    """Guards 'one bad flow never hides the others'."""
    write_flow(workspace, "good", GOOD)
    for name, (body, _, _) in BROKEN.items():
        write_flow(workspace, name, body)
    rows = {r["name"]: r for r in cli.json("flows")}
    assert rows["good"]["error"] is None and rows["good"]["resumable"] is True
    for name, (_, message, line) in BROKEN.items():
        row = rows[name]
        assert row["resumable"] is None, name
        assert message in row["error"], (name, row["error"])
        assert f"flows/{name}/flow.py{line}" in row["error"], (name, row["error"])


@pytest.mark.parametrize("name", sorted(BROKEN))
def test_running_a_broken_flow_is_refused_before_any_run_exists(
    workspace: Path, cli: CLI, name: str
) -> None:
    write_flow(workspace, name, BROKEN[name][0])
    done = cli("run", name, "--json")
    assert done.returncode == 1
    assert BROKEN[name][1] in orjson.loads(done.stdout)["error"]["message"]
    assert not (workspace / ".flowdrop" / "runs").exists() or not any(
        (workspace / ".flowdrop" / "runs").iterdir()
    )


def test_a_hanging_flow_is_listed_as_not_answering_and_others_still_shown(
    workspace: Path, cli: CLI
) -> None:
    write_flow(workspace, "good", GOOD)
    write_flow(workspace, "hangs", "import time\ntime.sleep(60)\n")
    rows = {r["name"]: r for r in cli.json("flows")}
    assert "did not answer in 5 s" in rows["hangs"]["error"]
    assert rows["good"]["error"] is None
    refused = cli("run", "hangs", "--json")
    assert refused.returncode == 1


def test_listing_never_imports_flow_code(workspace: Path, cli: CLI) -> None:
    """Guards the listing process: a flow's import side effects happen in a child only."""
    marker = workspace / "imported-by"
    write_flow(
        workspace,
        "spy",
        f"""
        import os
        from flowdrop_tui import flow
        with open({str(marker)!r}, "a") as f:
            f.write(str(os.getpid()) + "\\n")

        @flow()
        def main(run):
            return 1
    """,
    )
    import subprocess
    import sys

    code = (
        "import os, sys\nfrom pathlib import Path\n"
        "from flowdrop_tui.core import views\nfrom flowdrop_tui.core.paths import Layout\n"
        f"views.flow_rows(Layout(Path({str(workspace)!r})))\nprint(os.getpid())\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    lister = done.stdout.strip()
    importers = marker.read_text().split()
    assert importers and lister not in importers


def test_descriptions_are_cached_by_content_and_refreshed_on_change(
    workspace: Path, cli: CLI
) -> None:
    folder = write_flow(workspace, "good", GOOD)
    assert cli.json("flows")[0]["description"] == "good one"
    cache = orjson.loads((workspace / ".flowdrop" / "cache" / "flows.json").read_bytes())
    assert "flows/good" in cache["entries"]
    (folder / "flow.py").write_text((folder / "flow.py").read_text().replace("good one", "better"))
    assert cli.json("flows")[0]["description"] == "better"
    (folder / "helper.py").write_text("X = 1\n")
    entry = orjson.loads((workspace / ".flowdrop" / "cache" / "flows.json").read_bytes())
    cli.json("flows")
    after = orjson.loads((workspace / ".flowdrop" / "cache" / "flows.json").read_bytes())
    assert after["entries"]["flows/good"]["hash"] != entry["entries"]["flows/good"]["hash"]


def test_a_flow_may_import_a_helper_beside_it(workspace: Path, cli: CLI) -> None:
    folder = write_flow(
        workspace,
        "helped",
        """
        from flowdrop_tui import flow
        from helper import VALUE

        @flow()
        def main(run):
            run.state["value"] = VALUE
            return VALUE
    """,
    )
    (folder / "helper.py").write_text("VALUE = 42\n")
    assert cli.json("run", "helped")["result"] == 42


def test_no_flows_folder_says_how_to_write_the_first(workspace: Path, cli: CLI) -> None:
    (workspace / "flows").rmdir()
    done = cli("flows", check=0)
    assert "flows/<name>/" in done.stdout and "flow.py" in done.stdout
    assert cli.json("flows") == []


def test_unknown_flow_name_is_exit_2_listing_known_ones(workspace: Path, cli: CLI) -> None:
    write_flow(workspace, "good", GOOD)
    done = cli("run", "nope", "--json")
    assert done.returncode == 2
    message = orjson.loads(done.stdout)["error"]["message"]
    assert "nope" in message and "good" in message


def test_flow_names_with_spaces_and_unicode_work(workspace: Path, cli: CLI) -> None:
    for name in ("my flow", "revisión"):
        write_flow(workspace, name, GOOD)
        out = cli.json("run", name)
        assert out["flow"] == name and out["status"] == "completed"
    names = [r["name"] for r in cli.json("flows")]
    assert "my flow" in names and "revisión" in names


HOSTILE = {
    "exits": ("import os\nos._exit(3)\n", "ended the process"),
    "kills_itself": (
        "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n",
        "ended the process",
    ),
    "prints": ('print(\'{"ok": true, "resumable": true}\')\n' + textwrap.dedent(GOOD), None),
    "reads_stdin": ("import sys\nsys.stdin.read()\n" + textwrap.dedent(GOOD), None),
    "leaves_a_child": (
        "import os, time\nif os.fork() == 0:\n    time.sleep(30)\n    os._exit(0)\n"
        + textwrap.dedent(GOOD),
        None,
    ),
}


def test_many_flows_described_at_once_each_answer_for_itself(workspace: Path, cli: CLI) -> None:
    """Guards the describing server (one Python, a forked child per flow): a flow that
    exits, kills itself, prints a fake answer, reads stdin or leaves a process behind
    answers for itself alone; the others are described right."""
    write_flow(workspace, "good", GOOD)
    for name, (body, _) in HOSTILE.items():
        write_flow(workspace, name, body)
    rows = {r["name"]: r for r in cli.json("flows")}
    assert rows["good"]["error"] is None and rows["good"]["resumable"] is True
    for name, (_, error) in HOSTILE.items():
        if error is None:
            assert rows[name]["error"] is None and rows[name]["resumable"] is True, rows[name]
        else:
            assert error in (rows[name]["error"] or ""), rows[name]
            assert f"flows/{name}/flow.py" in rows[name]["error"]


def test_starts_queued_while_remote_are_not_shown_once_the_workspace_is_local(
    workspace: Path, cli: CLI
) -> None:
    """Guards a plain local workspace against a stale `.flowdrop/queued.json` (written by
    a remote replica's sync, which a local workspace never runs): `runs` lists no
    pending start, and the file is gone."""
    from flowdrop_tui.core.paths import Layout
    from flowdrop_tui.core.records.listing import queued_starts

    layout = Layout(workspace)
    layout.ensure()
    start = queued_starts.QueuedStart("ghost", "2026-12-06T10:00:00Z", "flowdrop", "alice")
    assert queued_starts.write(layout, [start])
    assert queued_starts.read(layout) == [start]
    rows = cli.json("runs")
    assert rows == []
    assert "queued" not in cli("runs", check=0).stdout
    assert not (layout.root / queued_starts.QUEUED).exists()
