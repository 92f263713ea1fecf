"""A run on a worker (a mirror writes its record through to PostgreSQL) sends each
notice once across workers: its record's ``notice_sent`` is the ledger — committed
through the mirror before the notice is spooled, and a notice the record already
holds is never sent again, though the claim marks of another worker's worktree are not
here (docs/remote.md, "Notices"). The space's settings placed in a worktree stand for
``[notify]``, and the notice goes from the worker's folder, not the worktree."""

from __future__ import annotations

import contextlib
import shutil
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import pytest

from flowdrop_tui.core.control import notify
from flowdrop_tui.core.paths import Layout
from flowdrop_tui.core.records import mirror
from flowdrop_tui.core.records.log.event_log import EventLog
from flowdrop_tui.core.run import notices
from tests.conftest import wait_for
from tests.gates.test_notices import SINK, received

RUN = "20261206T000000.000Z-abc123"


@dataclass
class Recording:
    """A mirror that keeps the lines written through, and whether a notice was
    already spooled when each arrived."""

    spool: Path
    keeps_durably: bool = True
    lines: list[tuple[dict[str, Any], bool]] = field(default_factory=list)

    def wrote(self, path: Path, data: bytes) -> None:
        pass

    def appended(self, path: Path, data: bytes, offset: int) -> None:
        spooled = self.spool.is_dir() and any(self.spool.glob("*.json"))
        self.lines.append((orjson.loads(data), spooled))

    def published(self, run_dir: Path) -> None:
        pass

    def shared(self, name: str) -> contextlib.AbstractContextManager[None]:
        return contextlib.nullcontext()


@dataclass
class Host:
    layout: Layout
    run_id: str
    run_dir: Path
    key: str
    log: EventLog


def place(folder: Path, table: dict[str, Any], sender: Path | None) -> Layout:
    layout = Layout(folder)
    layout.root.mkdir(parents=True, exist_ok=True)
    placed = {"v": 1, "notify": table, "sender": str(sender) if sender else None}
    (layout.root / notify.SPACE_SETTINGS).write_bytes(orjson.dumps(placed))
    return layout


def worktree(folder: Path, table: dict[str, Any], sender: Path, record: bytes) -> Host:
    """A worker's worktree of the run: the space's settings placed, the record as
    PostgreSQL holds it (a replica: no claim marks of any other worktree)."""
    layout = place(folder, table, sender)
    run_dir = layout.runs / RUN
    run_dir.mkdir(parents=True)
    (run_dir / "cycle.jsonl").write_bytes(record)
    return Host(layout, RUN, run_dir, "asks", EventLog(run_dir / "cycle.jsonl"))


@pytest.fixture
def on_a_worker(tmp_path: Path) -> Iterator[Recording]:
    found = Recording(tmp_path / "sender" / ".flowdrop" / "notices" / "spool")
    mirror.install(found)
    try:
        yield found
    finally:
        mirror.install(None)


def test_a_notice_the_record_holds_is_never_sent_again_by_another_worker(
    tmp_path: Path, on_a_worker: Recording
) -> None:
    out = tmp_path / "notices.jsonl"
    table = {"command": [sys.executable, "-c", SINK, str(out)], "completed": True}
    sender = tmp_path / "sender"
    place(sender, table, None)
    before = orjson.dumps({"event": "notice_sent", "id": f"{RUN}/gate-g1", "kind": "gate"})
    first = worktree(tmp_path / "first", table, sender, before + b"\n")

    notices.announce(first, "gate-g1", "gate", "question: ship?")  # an earlier worker's
    assert on_a_worker.lines == [] and not (first.run_dir / "notices").exists()

    notices.announce(first, "completed", "completed", "completed: 1")
    assert [(line["event"], line["id"]) for line, _ in on_a_worker.lines] == [
        ("notice_sent", f"{RUN}/completed")
    ]
    assert on_a_worker.lines[0][1] is False  # in the ledger before it was spooled
    assert not (first.layout.root / "notices").exists()  # spooled at the worker's folder
    wait_for(lambda: [n["id"] for n in received(out)] == [f"{RUN}/completed"], 30)

    # The run continues on another worker: its worktree holds the record, not the marks.
    record = (first.run_dir / "cycle.jsonl").read_bytes()
    second = worktree(tmp_path / "second", table, sender, record)
    notices.announce(second, "completed", "completed", "completed: 1")
    notices.announce(second, "gate-g1", "gate", "question: ship?")
    assert len(on_a_worker.lines) == 1
    assert not (second.run_dir / "notices").exists()
    notices.announce(second, "failed-1", "failed", "failed: boom")
    wait_for(lambda: len(received(out)) == 2, 30)
    assert [n["id"] for n in received(out)] == [f"{RUN}/completed", f"{RUN}/failed-1"]


def test_the_spaces_settings_stand_for_the_repositorys_notify(tmp_path: Path) -> None:
    layout = Layout(tmp_path / "tree")
    layout.root.mkdir(parents=True)
    (layout.root / "config.toml").write_text('[notify]\ncommand = ["mine"]\ncompleted = true\n')
    assert notify.settings(layout).command == ["mine"]
    place(tmp_path / "tree", {}, None)
    found = notify.settings(layout)
    assert (found.sends, found.completed, found.problems) == (False, False, [])
    place(tmp_path / "tree", {"webhook": "ftp://no"}, tmp_path / "sender")
    assert notify.settings(layout).problems == [
        "[notify] webhook must be an http:// or https:// URL"
    ]
    assert notify.sending(layout).workspace == tmp_path / "sender"
    (layout.root / notify.SPACE_SETTINGS).write_bytes(b"{junk")
    found = notify.settings(layout)
    assert not found.sends and "could not be read" in found.problems[0]
    assert notify.sending(layout) == layout
    shutil.rmtree(layout.root)
    assert notify.settings(Layout(tmp_path / "tree")).problems == []


@pytest.mark.parametrize(
    ("words", "said"),
    [
        (["completed"], "'completed' is not KEY=VALUE"),
        (["=1"], "'=1' is not KEY=VALUE"),
        (["bogus=1"], "no setting 'bogus'; the settings are command, webhook, desktop"),
        (["terminal=true"], "terminal is the UI's own bell"),
        (["command=notify-me"], "command must be a list of strings"),
        (["command=[]"], "command must be a list of strings"),
        (["webhook=ftp://x"], "webhook must be an http:// or https:// URL"),
        (["completed=yes"], "completed must be true or false"),
        (["retry=[-1]"], "retry must be a list of seconds"),
        (["timeout=0"], "timeout must be seconds, more than 0"),
        (["--unset", "bogus"], "no setting 'bogus'"),
        (["--unset", "terminal"], "terminal is the UI's own bell"),
    ],
)
def test_remote_config_notify_refuses_a_bad_setting_in_one_line_before_any_server(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], words: list[str], said: str
) -> None:
    """Refused before PostgreSQL is asked (its address here answers nothing)."""
    from flowdrop_tui.cli import main

    (tmp_path / ".flowdrop").mkdir()
    (tmp_path / ".flowdrop" / "config.toml").write_text(
        '[remote]\ntemporal = "127.0.0.1:1"\npostgres = "postgresql://u@127.0.0.1:1/db"\n'
        'space = "team:app"\n'
    )
    code = main(["remote", "config", "notify", "--workspace", str(tmp_path), *words])
    err = capsys.readouterr().err
    assert code == 2 and said in err, err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_remote_config_notify_in_local_mode_says_where_local_notices_are_set(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from flowdrop_tui.cli import main

    (tmp_path / ".flowdrop").mkdir()
    code = main(["remote", "config", "notify", "completed=true", "--workspace", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 2 and "local mode" in err and ".flowdrop/config.toml [notify]" in err, err
    assert err.count("\n") == 1


def test_a_worker_starting_takes_up_the_retries_its_last_run_left(tmp_path: Path) -> None:
    """A worker stopped while a sink's retry waited in its folder for a space: the next
    worker of that home tries it again at its start, not only at the space's next notice."""
    from flowdrop_tui.core.control import notice_retries
    from flowdrop_tui.core.remote.postgres.notify_settings import resume_senders

    out = tmp_path / "notices.jsonl"
    home = tmp_path / "home"
    waiting = place(
        home / "notices" / "a1", {"command": [sys.executable, "-c", SINK, str(out)]}, None
    )
    place(home / "notices" / "b2", {"completed": True}, None)  # nothing waits there
    body = notify.notice(RUN, "asks", "gate-g1", "gate", "question: ship?")
    notice_retries.failed(waiting, "command", body, 1, "exited with 1", (0.0, 10.0))
    assert resume_senders(home) == 1
    wait_for(lambda: [n["id"] for n in received(out)] == [body["id"]], 30)
    wait_for(lambda: not notice_retries.pending(waiting), 30)
    assert resume_senders(home) == 0
    assert resume_senders(tmp_path / "no-home") == 0
