"""Every id, key or path that would leave .flowdrop/ is rejected (exit 2) before use."""

from __future__ import annotations

import threading
from pathlib import Path

import orjson
import pytest

from flowdrop_tui.core.errors import InvalidNameError
from flowdrop_tui.core.paths import (
    RUN_ID_RE,
    Layout,
    check_run_ref,
    key_filename,
    new_run_id,
    validate_key,
)
from tests.conftest import CLI, write_flow

ESCAPES = [
    "../x",
    "../../etc/passwd",
    "/etc/passwd",
    "a/../../b",
    "..",
    ".hidden",
    "x\x00y",
    "a\\b",
]

FLOW = """
    from flowdrop_tui import flow

    @flow(resumable=True)
    def main(run):
        run.state["x"] = 1
"""


def test_run_ids_have_the_documented_shape_and_sort_by_start() -> None:
    early, late = new_run_id(1_700_000_000.123), new_run_id(1_700_000_001.5)
    assert RUN_ID_RE.match(early) and RUN_ID_RE.match(late)
    assert early.startswith("20231114T221320.123Z-")
    assert sorted([late, early]) == [early, late]


@pytest.mark.parametrize("bad", ESCAPES)
def test_run_refs_that_could_be_paths_are_rejected(bad: str) -> None:
    with pytest.raises(InvalidNameError):
        check_run_ref(bad)


@pytest.mark.parametrize("bad", ["", "/abs", "a//b", "a/./b", "../x", "a/..", "x\x00", "a\\b"])
def test_keys_that_could_leave_are_rejected(bad: str) -> None:
    with pytest.raises(InvalidNameError):
        validate_key(bad)


def test_key_file_names_never_contain_a_separator() -> None:
    assert "/" not in key_filename("flows/nightly")


@pytest.mark.parametrize("bad", ["../x", "../../etc/passwd", "a/../../b", ".."])
@pytest.mark.parametrize("command", ["show", "snapshot", "stop", "pause", "resume"])
def test_commands_reject_escaping_run_ids_with_exit_2(
    workspace: Path, cli: CLI, command: str, bad: str
) -> None:
    done = cli(command, bad, "--json") if command != "snapshot" else cli(command, bad)
    assert done.returncode == 2, (command, bad, done.stdout, done.stderr)
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize("option", ["--from", "--resume"])
@pytest.mark.parametrize("bad", ["../x", "../../etc", "/tmp"])
def test_run_options_reject_escaping_ids_before_any_run(
    workspace: Path, cli: CLI, option: str, bad: str
) -> None:
    write_flow(workspace, "f", FLOW)
    done = cli("run", "f", option, bad, "--json")
    assert done.returncode == 2
    assert orjson.loads(done.stdout)["error"]["code"] == "INVALID_NAME"
    assert not (workspace / ".flowdrop" / "runs").exists() or not list(
        (workspace / ".flowdrop" / "runs").iterdir()
    )


@pytest.mark.parametrize("bad", ["..", "../outside", "flows/../../x"])
def test_flow_paths_outside_the_workspace_are_rejected(workspace: Path, cli: CLI, bad: str) -> None:
    done = cli("run", bad, "--json")
    assert done.returncode == 2
    assert "Traceback" not in done.stderr


def test_unknown_but_well_formed_run_is_exit_2(workspace: Path, cli: CLI) -> None:
    done = cli("show", "20200101T000000.000Z-abcdef", "--json")
    assert done.returncode == 2
    assert orjson.loads(done.stdout)["error"]["code"] == "NOT_FOUND"


def test_workspace_option_works_before_and_after_the_command(
    workspace: Path, cli: CLI, tmp_path: Path
) -> None:
    write_flow(workspace, "f", FLOW)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    a = cli("--workspace", str(workspace), "flows", "--json", cwd=elsewhere, check=0)
    b = cli("flows", "--workspace", str(workspace), "--json", cwd=elsewhere, check=0)
    assert orjson.loads(a.stdout)[0]["name"] == orjson.loads(b.stdout)[0]["name"] == "f"
    missing = cli("flows", "--workspace", str(tmp_path / "nope"), "--json", cwd=elsewhere)
    assert missing.returncode == 2


def test_workspace_is_the_git_top_level_from_a_subfolder(workspace: Path, cli: CLI) -> None:
    write_flow(workspace, "f", FLOW)
    out = cli("run", "f", "--json", cwd=workspace / "flows" / "f", check=0)
    run = orjson.loads(out.stdout)["run"]
    assert (workspace / ".flowdrop" / "runs" / run).is_dir()
    assert (workspace / ".flowdrop" / ".gitignore").read_text().strip() == "*"


def test_outside_git_the_workspace_is_the_current_folder(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    write_flow(plain, "f", FLOW)
    cli = CLI(plain)
    out = cli.json("run", "f")
    assert (plain / ".flowdrop" / "runs" / out["run"]).is_dir()
    assert cli.json("show", out["run"])["git"] is None


def test_usage_errors_are_exit_2_with_json_envelope(workspace: Path, cli: CLI) -> None:
    done = cli("run", "--json")
    assert done.returncode == 2
    assert orjson.loads(done.stdout)["error"]["code"] == "USAGE"
    both = cli("run", "f", "--fresh", "--from", "x", "--json")
    assert both.returncode == 2


def test_unwritable_records_refuse_the_run_up_front(workspace: Path, cli: CLI) -> None:
    """Root ignores permission bits, so the records folder is made impossible to write into."""
    write_flow(workspace, "f", FLOW)
    (workspace / ".flowdrop").mkdir()
    (workspace / ".flowdrop" / "runs").write_text("a file where a folder should be")
    done = cli("run", "f", "--json")
    assert done.returncode == 3
    error = orjson.loads(done.stdout)["error"]
    assert error["code"] == "RECORDS_UNWRITABLE" and ".flowdrop" in error["message"]
    assert "Traceback" not in done.stderr
    detached = cli("run", "f", "--detach", "--json")
    assert detached.returncode == 3


def _make_at_once(layout: Layout, threads: int) -> list[BaseException]:
    start = threading.Barrier(threads)
    failures: list[BaseException] = []

    def make() -> None:
        start.wait()
        try:
            layout.check_writable()
        except BaseException as exc:  # every failure is the finding
            failures.append(exc)

    running = [threading.Thread(target=make) for _ in range(threads)]
    for thread in running:
        thread.start()
    for thread in running:
        thread.join()
    return failures


def test_threads_making_the_records_folder_at_once_all_succeed(tmp_path: Path) -> None:
    """Guards a race seen under load: two threads of one process (a replica's syncs, the
    UI's readers) made `.flowdrop/` at once and one was refused "File exists" — the
    `.gitignore`'s temporary file and the write probe were named by the process only."""
    for attempt in range(20):
        (tmp_path / f"ws{attempt}").mkdir()
        layout = Layout(tmp_path / f"ws{attempt}")
        assert _make_at_once(layout, 8) == []
        assert (layout.root / ".gitignore").read_bytes() == b"*\n"
        assert [p.name for p in layout.root.iterdir() if p.name.endswith(".tmp")] == []
