"""Reading usage from transcripts (SPEC §14), and Claude Code's project-folder rule.

Shapes as the real CLIs write them (Claude Code 2.1.332, Codex 0.171.0), and
every way a transcript can be wrong: a reader never raises, it reads what it can.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from flowdrop_tui.core.records.spend.usage import Usage, read_usage, total
from flowdrop_tui.core.sessions.claude import folder_name, project_folder
from tests.conftest import CLI, write_flow
from tests.flow_bodies import DOES_NOTHING
from tests.seeded_records import reindex, seed_run


def write(path: Path, *records: Any, tail: str = "") -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records) + tail)
    return path


def assistant(message_id: Any, usage: Any, block: str = "text") -> dict[str, Any]:
    return {
        "type": "assistant",
        "message": {"id": message_id, "content": [{"type": block}], "usage": usage},
    }


CLAUDE_USAGE = {
    "input_tokens": 10,
    "cache_creation_input_tokens": 300,
    "cache_read_input_tokens": 5000,
    "output_tokens": 42,
    "server_tool_use": {"web_search_requests": 0},
}


def test_claude_counts_each_message_once_across_its_lines(tmp_path: Path) -> None:
    transcript = write(
        tmp_path / "t.jsonl",
        {"type": "user", "message": {"role": "user", "content": "hi"}},
        assistant("msg_1", {**CLAUDE_USAGE, "output_tokens": 1}, "thinking"),
        assistant("msg_1", CLAUDE_USAGE, "text"),  # the same message: its last line counts
        assistant("msg_2", {"input_tokens": 5, "output_tokens": 8}),
        {"type": "attachment", "message": {"usage": CLAUDE_USAGE}},  # not an assistant line
    )
    assert read_usage("claude", transcript) == Usage(
        input=10 + 300 + 5000 + 5, output=42 + 8, cache_read=5000, cache_write=300
    )


@pytest.mark.parametrize(
    "bad",
    [
        "not json at all",
        '{"type": "assistant", "message": "a string"}',
        '{"type": "assistant", "message": {"id": "m", "usage": [1, 2]}}',
        '{"type": "assistant", "message": {"id": "m"}}',
        "[1, 2, 3]",
        '{"type": "assistant", "message": {"id": "m", "usage": {"input_tokens": "',
    ],
)
def test_claude_lines_that_are_not_usage_are_skipped(tmp_path: Path, bad: str) -> None:
    transcript = write(tmp_path / "t.jsonl", assistant("ok", {"input_tokens": 3}), tail=bad)
    assert read_usage("claude", transcript) == Usage(input=3)


def test_claude_numbers_that_are_not_counts_count_as_zero(tmp_path: Path) -> None:
    weird = {"input_tokens": -5, "output_tokens": True, "cache_read_input_tokens": 2.5}
    transcript = write(
        tmp_path / "t.jsonl", assistant(None, weird), assistant(7, {"output_tokens": 4})
    )
    assert read_usage("claude", transcript) == Usage(output=4)


def test_codex_takes_the_last_running_total(tmp_path: Path) -> None:
    def count(total: Any) -> dict[str, Any]:
        return {
            "type": "event_msg",
            "payload": {"type": "token_count", "info": total and {"total_token_usage": total}},
        }

    transcript = write(
        tmp_path / "rollout.jsonl",
        {"type": "session_meta", "payload": {"id": "x"}},
        count({"input_tokens": 100, "cached_input_tokens": 40, "output_tokens": 5}),
        count(None),  # Codex writes token_count with info null before the first answer
        count(
            {
                "input_tokens": 900,
                "cached_input_tokens": 700,
                "output_tokens": 50,
                "cache_write_input_tokens": 3,
                "reasoning_output_tokens": 9,
            }
        ),
        {"type": "event_msg", "payload": {"type": "token_count", "info": {"total_token_usage": 1}}},
    )
    # Its input already includes the cached tokens: not added again.
    assert read_usage("codex", transcript) == Usage(
        input=900, output=50, cache_read=700, cache_write=3
    )


def test_no_usage_where_there_is_none_to_read(tmp_path: Path) -> None:
    empty = write(tmp_path / "empty.jsonl")
    assert read_usage("claude", empty) is None
    assert read_usage("codex", empty) is None
    assert read_usage("claude", tmp_path / "gone.jsonl") is None  # deleted by its CLI
    assert read_usage("claude", tmp_path) is None  # a folder, not a file
    assert read_usage("command", empty) is None  # no usage to speak of
    assert read_usage("claude", None) is None
    binary = tmp_path / "binary.jsonl"
    binary.write_bytes(b"\xff\xfe\x00garbage\n")
    assert read_usage("codex", binary) is None


def test_usage_adds_up_and_round_trips() -> None:
    one, two = Usage(1, 2, 3, 4), Usage(10, 20, 30, 40)
    assert total([one, None, two]) == Usage(11, 22, 33, 44)
    assert total([None, None]) is None and total([]) is None
    assert Usage.from_json(one.to_json()) == one
    assert (one + two).tokens == 11 + 22
    assert Usage.from_json({"input": 5}) == Usage(input=5)
    for bad in (None, [], "x", {"input": -1}, {"output": 1.5}, {"cache_read": True}):
        assert Usage.from_json(bad) is None


# -- Claude Code's project folder -------------------------------------------------------


def test_claude_folder_names_as_claude_code_spells_them() -> None:
    assert folder_name("/home/me/my repo") == "-home-me-my-repo"
    assert folder_name("/tmp/proj 🚀 café") == "-tmp-proj----caf-"  # an emoji: two dashes
    assert folder_name("/tmp/cafe\u0301") == "-tmp-cafe-"  # a combining accent: one
    exactly = "/" + "a" * 199
    assert folder_name(exactly) == "-" + "a" * 199  # 200: kept whole
    # Over 200: cut, "-", and the hash Claude Code 2.1.332 wrote for this very path.
    deep = "/tmp/hand/fold/" + "/".join(["a-very-long-folder-name-éx"] * 10)
    name = folder_name(deep)
    assert name.endswith("-685m62") and len(name) == 200 + len("-685m62")
    assert name[:200] == folder_name(deep[:200])[:200]


def test_claude_project_dir_override_is_taken_only_as_claude_code_takes_it(
    tmp_path: Path,
) -> None:
    env = {"CLAUDE_CONFIG_DIR": str(tmp_path), "CLAUDE_CODE_PROJECT_DIR_NAME": "fixed_name-1"}
    assert project_folder(tmp_path, env) == "fixed_name-1"
    assert project_folder(tmp_path, {"CLAUDE_CODE_PROJECT_DIR_NAME": "fixed"}) == folder_name(
        str(tmp_path.resolve())
    )  # without CLAUDE_CONFIG_DIR it is ignored
    for unsafe in ("../up", "a/b", "x" * 65, "con", "LPT1", ""):
        env["CLAUDE_CODE_PROJECT_DIR_NAME"] = unsafe
        assert project_folder(tmp_path, env) == folder_name(str(tmp_path.resolve()))


@pytest.mark.parametrize(
    "recorded",
    [None, "lots", [1, 2], {"input": -3}, {"input": "9"}, {"output": 1e9}, {"input": True}],
)
def test_a_damaged_recorded_usage_is_shown_as_none(
    workspace: Path, cli: CLI, recorded: Any
) -> None:
    """A `session_closed` whose usage is not the recorded shape (hand-edited, another
    version's) is no usage: show, runs and flows answer, with `null`, never a crash."""
    write_flow(workspace, "k", DOES_NOTHING)
    run_id = "20260817T010000.000Z-aaaaaa"
    seed_run(workspace, run_id, "k", last_round=1)
    cycle = workspace / ".flowdrop" / "runs" / run_id / "cycle.jsonl"
    with open(cycle, "a") as out:
        for event in (
            {
                "event": "session_opened",
                "session": f"{run_id}-000001",
                "key": "k",
                "backend": "claude",
                "link": "sessions/000001-claude.jsonl",
                "target": None,
            },
            {
                "event": "session_closed",
                "session": f"{run_id}-000001",
                "exit_code": 0,
                "usage": recorded,
            },
        ):
            out.write(json.dumps(event) + "\n")
    reindex(workspace)
    detail = cli.json("show", run_id)
    assert detail["sessions"][0]["usage"] is None and detail["usage"] is None
    assert cli.json("runs", "k")[0]["usage"] is None
    assert [f["usage"] for f in cli.json("flows")] == [None]
    assert "usage" not in cli("show", run_id, check=0).stdout.split("state")[0]


def test_a_session_never_closed_shows_what_its_transcript_says_so_far(
    workspace: Path, cli: CLI, tmp_path: Path
) -> None:
    """A session still running (or whose run was killed before it closed) has no
    recorded usage: `show` reads it through the link; `runs` counts closed ones only."""
    write_flow(workspace, "k", DOES_NOTHING)
    run_id = "20260817T010000.000Z-aaaaaa"
    seed_run(workspace, run_id, "k", last_round=1)
    transcript = write(
        tmp_path / "live.jsonl",
        assistant("msg_1", {"input_tokens": 10, "output_tokens": 2}, "thinking"),
        assistant("msg_1", {"input_tokens": 10, "output_tokens": 2}),
    )
    folder = workspace / ".flowdrop" / "runs" / run_id
    (folder / "sessions" / "000001-claude.jsonl").symlink_to(transcript)
    with open(folder / "cycle.jsonl", "a") as out:
        opened = {
            "event": "session_opened",
            "session": f"{run_id}-000001",
            "key": "k",
            "backend": "claude",
            "link": "sessions/000001-claude.jsonl",
            "target": str(transcript),
        }
        out.write(json.dumps(opened) + "\n")
    reindex(workspace)
    detail = cli.json("show", run_id)
    spent = {"input": 10, "output": 2, "cache_read": 0, "cache_write": 0}
    assert detail["sessions"][0]["closed"] is False
    assert detail["sessions"][0]["usage"] == spent and detail["usage"] == spent
    assert cli.json("runs", "k")[0]["usage"] is None
