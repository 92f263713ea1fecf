"""What the UI's first frame skips must not change what a command does (bench/README.md,
(a)): the bare command's parser without the verbs reads its line as the whole grammar
does, and the collector paused at the start runs again for every verb."""

from __future__ import annotations

import gc
import json
import subprocess
import sys
from pathlib import Path

import pytest

from flowdrop_tui.cli.parser import grammar, parse
from flowdrop_tui.core.errors import UsageError


def _parsed(argv: list[str], *, whole: bool) -> object:
    try:
        args = grammar().parse_args(argv) if whole else parse(argv)
    except UsageError as exc:
        return ("usage", exc.message)
    except SystemExit as exc:  # --help, --version: argparse's own answer
        return ("exit", exc.code)
    return vars(args)


@pytest.mark.parametrize(
    "argv",
    [
        [],
        ["--workspace", "ws"],
        ["--workspace=ws"],
        ["--workspace", "run"],
        ["--workspace"],
        ["--workspace", "--json"],
        ["--workspace", "-h"],
        ["--workspace="],
        ["--work", "ws"],
        ["ws"],
        ["run"],
        ["flows", "--workspace", "ws"],
    ],
)
def test_the_bare_command_is_read_as_the_whole_grammar_reads_it(argv: list[str]) -> None:
    assert _parsed(argv, whole=False) == _parsed(argv, whole=True)


FLOW = """\
import gc

from flowdrop_tui import flow


@flow()
def main(run):
    run.state["collecting"] = gc.isenabled()
"""


def test_a_verb_runs_with_the_collector_on(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (ws / "flows" / "one").mkdir(parents=True)
    (ws / "flows" / "one" / "flow.py").write_text(FLOW)
    code = (
        "import gc, sys\n"
        "from flowdrop_tui import cli\n"
        "code = cli.main(sys.argv[1:])\n"
        "print('AFTER', gc.isenabled())\n"
        "sys.exit(code)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, "run", "one", "--json", "--workspace", str(ws)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "AFTER True"
    (run_dir,) = (ws / ".flowdrop" / "runs").iterdir()
    assert json.loads((run_dir / "state.json").read_text()) == {"one": {"collecting": True}}


def test_a_collector_turned_off_by_its_process_stays_off(tmp_path: Path) -> None:
    """Only the pause ``cli.main`` took is undone: a caller's own choice is kept."""
    code = (
        "import gc, sys\n"
        "gc.disable()\n"
        "from flowdrop_tui import cli\n"
        "cli.main(['flows', '--workspace', sys.argv[1]])\n"
        "print('AFTER', gc.isenabled())\n"
    )
    (tmp_path / "flows").mkdir()
    done = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "AFTER False"


async def test_the_ui_collects_again_after_its_first_frame(workspace: Path) -> None:
    """``cli.main`` pauses the collector for the UI's start; the first frame ends it."""
    from flowdrop_tui.core import gc_pause
    from flowdrop_tui.core.paths import Layout
    from flowdrop_tui.tui.app import FlowdropApp
    from tests.conftest import write_flow
    from tests.flow_bodies import DOES_NOTHING

    write_flow(workspace, "a", DOES_NOTHING)
    app = FlowdropApp(Layout(workspace))
    gc_pause.pause()
    try:
        async with app.run_test() as pilot:
            for _ in range(400):  # up to 20 s on a loaded machine
                if app._main().ready:
                    break
                await pilot.pause(0.05)
            assert app._main().ready
            assert gc.isenabled()
            await pilot.press("q")
    finally:
        gc_pause.resume()
    assert app.return_code == 0
