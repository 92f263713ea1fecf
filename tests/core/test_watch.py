"""WorkspaceWatch: file changes in, domain events out, and nothing for mere reading."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable
from pathlib import Path

from flowdrop_tui.core.paths import Layout
from flowdrop_tui.core.watch import FlowsChanged, IndexChanged, RunChanged, WorkspaceWatch

RUN = "20260817T010000.000Z-abcdef"


async def collect(
    watch: WorkspaceWatch, actions: list[Callable[[], Awaitable[None] | None]]
) -> list[list[object]]:
    """Run ``actions`` one by one, each followed by a quiet spell; return what each caused."""
    found: list[list[object]] = [[] for _ in actions]
    current = -1

    async def reader() -> None:
        async for batch in watch.events():
            if current >= 0:
                found[current].extend(batch)

    task = asyncio.create_task(reader())
    await asyncio.sleep(0.3)  # the watchers register
    for n, action in enumerate(actions):
        current = n
        result = action()
        if result is not None:
            await result
        await asyncio.sleep(0.6)
    task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        pass
    return found


async def test_changes_become_domain_events(workspace: Path) -> None:
    """Guards the event vocabulary and what is (and is not) watched."""
    layout = Layout(workspace)
    runs = workspace / ".flowdrop" / "runs"
    watch = WorkspaceWatch(layout)

    def new_flow() -> None:
        (workspace / "flows" / "x").mkdir()
        (workspace / "flows" / "x" / "flow.py").write_text("x = 1\n")

    def new_records() -> None:
        (runs / RUN).mkdir(parents=True)

    def index_written() -> None:
        (workspace / ".flowdrop" / "index.json.tmp").write_text("{}")
        os.replace(
            workspace / ".flowdrop" / "index.json.tmp", workspace / ".flowdrop" / "index.json"
        )

    def append_unfollowed() -> None:
        with (runs / RUN / "cycle.jsonl").open("ab") as handle:
            handle.write(b'{"event": "log"}\n')

    def follow() -> None:
        watch.follow([RUN])

    def append_followed() -> None:
        with (runs / RUN / "cycle.jsonl").open("ab") as handle:
            handle.write(b'{"event": "log"}\n')

    def only_read() -> None:
        (runs / RUN / "cycle.jsonl").read_bytes()
        fd = os.open(workspace / ".flowdrop" / "index.lock", os.O_RDWR | os.O_CREAT)
        os.close(fd)

    def other_file() -> None:
        (workspace / "README").write_text("hello")

    found = await collect(
        watch,
        [
            new_flow,
            new_records,
            index_written,
            append_unfollowed,
            follow,
            append_followed,
            only_read,
            other_file,
        ],
    )
    assert FlowsChanged() in found[0]
    assert IndexChanged() in found[1]  # .flowdrop/ appeared
    assert found[2] == [IndexChanged()]
    assert found[3] == []  # a run nobody follows is not watched closely
    assert found[4] == [RunChanged(RUN)]  # newly followed: read it once
    assert found[5] == [RunChanged(RUN)]
    assert found[6] == []
    assert found[7] == []


async def test_a_new_run_folder_is_reported(workspace: Path) -> None:
    """Guards how the UI learns of a run started elsewhere: its folder appearing."""
    (workspace / ".flowdrop" / "runs").mkdir(parents=True)
    watch = WorkspaceWatch(Layout(workspace))

    def new_run() -> None:
        hidden = workspace / ".flowdrop" / "runs" / f".new-{RUN}"
        hidden.mkdir()
        (hidden / "cycle.jsonl").write_text("")
        os.rename(hidden, workspace / ".flowdrop" / "runs" / RUN)

    found = await collect(watch, [new_run])
    assert found[0] == [RunChanged(RUN)]


async def test_a_run_followed_before_its_folder_appears_is_watched_once_it_does(
    workspace: Path,
) -> None:
    """Guards remote mode's launch: the UI follows the run it launched before the
    replica has its folder; once the folder appears, the run's later writes must be
    reported too (they went unseen, and the UI kept showing a paused run as running)."""
    runs = workspace / ".flowdrop" / "runs"
    runs.mkdir(parents=True)
    watch = WorkspaceWatch(Layout(workspace))

    def follow() -> None:
        watch.follow([RUN])

    def appears() -> None:
        hidden = runs / f".new-{RUN}"
        hidden.mkdir()
        (hidden / "cycle.jsonl").write_text('{"event": "created"}\n')
        os.rename(hidden, runs / RUN)

    def writes() -> None:
        with open(runs / RUN / "cycle.jsonl", "a") as log:
            log.write('{"event": "paused"}\n')

    found = await collect(watch, [follow, appears, writes])
    assert RunChanged(RUN) in found[1]
    assert RunChanged(RUN) in found[2]


async def test_a_followed_run_whose_process_dies_is_reported(workspace: Path) -> None:
    """Guards kill -9: it changes no file, yet the UI must learn the run is interrupted."""
    import signal
    import subprocess
    import sys

    folder = workspace / ".flowdrop" / "runs" / RUN
    folder.mkdir(parents=True)
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import fcntl, os, sys, time\n"
            f"fd = os.open({str(folder / 'live.lock')!r}, os.O_RDWR | os.O_CREAT)\n"
            "fcntl.lockf(fd, fcntl.LOCK_EX)\nprint('locked', flush=True)\ntime.sleep(120)\n",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
    watch = WorkspaceWatch(Layout(workspace))

    def follow() -> None:
        watch.follow([RUN])

    async def kill() -> None:
        await asyncio.sleep(1.5)  # a liveness check has seen it alive
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait()
        await asyncio.sleep(1.5)  # … and the next one sees it dead

    try:
        found = await collect(watch, [follow, kill])
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait()
    assert found[0] == [RunChanged(RUN)]  # newly followed
    assert found[1] == [RunChanged(RUN)]  # died: no file changed, liveness said so
