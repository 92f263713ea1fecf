"""How a command ends: a verb returns its exit status, or ``WithoutTeardown(status)``
when the process must leave through ``os._exit`` (the UI, a worker); ``cli.main`` is
the one place that acts on it (cli/ending.py)."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import orjson
import pytest

from flowdrop_tui import cli
from flowdrop_tui.cli.ending import WithoutTeardown


class Left(Exception):
    """``leave`` was called: the process would have left through ``os._exit``."""


@pytest.fixture
def left(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    codes: list[int] = []

    def leave(code: int) -> None:
        codes.append(code)
        raise Left

    monkeypatch.setattr(cli, "leave", leave)
    return codes


def _verb_returning(
    monkeypatch: pytest.MonkeyPatch, ended: int | WithoutTeardown
) -> list[argparse.Namespace]:
    seen: list[argparse.Namespace] = []

    def verb(args: argparse.Namespace) -> int | WithoutTeardown:
        seen.append(args)
        return ended

    monkeypatch.setattr(cli, "handler", lambda command: verb)
    return seen


def test_a_verb_that_returns_without_teardown_leaves_through_os_exit(
    monkeypatch: pytest.MonkeyPatch, left: list[int], tmp_path: Path
) -> None:
    """Guards the UI's and the worker's exit: the status they return is the one the
    process leaves with, and it leaves without the interpreter's teardown."""
    seen = _verb_returning(monkeypatch, WithoutTeardown(3))
    with pytest.raises(Left):
        cli.main(["flows", "--workspace", str(tmp_path)])
    assert left == [3]
    assert not hasattr(seen[0], "exit_without_teardown")  # no flag on args any more


def test_a_verb_that_returns_a_status_returns_it(
    monkeypatch: pytest.MonkeyPatch, left: list[int], tmp_path: Path
) -> None:
    """Guards every other verb (local mode, no Temporal): an ordinary return, torn down."""
    _verb_returning(monkeypatch, 5)
    assert cli.main(["flows", "--workspace", str(tmp_path)]) == 5
    assert left == []


def test_a_worker_refused_still_leaves_without_teardown(
    monkeypatch: pytest.MonkeyPatch,
    left: list[int],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Guards the worker's refusal (half a config: no PostgreSQL): said as one line with
    its usage code, and the process still leaves without the teardown, as before."""
    for name in [v for v in os.environ if v.startswith("FLOWDROP_")]:
        monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(Left):
        cli.main(["worker", "--temporal", "127.0.0.1:1", "--json"])
    assert left == [2]
    said = capsys.readouterr()
    assert said.err.startswith("flowdrop-tui: ") and said.err.count("\n") == 1, said.err
    assert orjson.loads(said.out)["error"]["code"] == "USAGE"
