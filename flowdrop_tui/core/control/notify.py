"""Notices (SPEC §21): where ``[notify]`` sends them, and sending each exactly once.

A notice is ``{"id", "run", "flow", "kind", "message", "at"}``; its id is
``<run>/<name>``, and ``name`` says which event of the run it is about
(``gate-<gate id>``, ``budget-<stretch>``, ``failed-<stretch>``…: the inbox item's id).

**Exactly once.** Whoever sends a notice first creates ``runs/<run>/notices/<name>``
with ``O_CREAT|O_EXCL`` (links refused): the run itself for what it does (it claims
before it records the event, so it wins), or, for a run that died, the first viewer
(``inbox``, the UI) to see the item. Whoever fails to create it sends nothing.

**Never in the run's way.** A claimed notice is written to ``.flowdrop/notices/spool/``
and a detached sender (``python -m flowdrop_tui.core.control.notify WORKSPACE``, its
own session) delivers it: one sender at a time (``deliver.lock``). The first notice
goes at once (after ``SETTLE`` s of quiet); what arrives in the ``DEBOUNCE`` seconds
after a delivery is held, and a run's notices among it are merged into one — never
one per round. Every sink runs in a thread with a timeout (``[notify] timeout``,
``SINK_TIMEOUT`` by default); a command past it is killed with its whole process
group. A command has delivered when it exits 0, whatever it left running: no pipe is
waited on (its input and error output are files). A sink that fails or hangs is
written to ``notices/failures.jsonl`` and tried again on a schedule, then kept as
undelivered for the inbox (``notice_retries``); the sender stays while a retry waits.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import tomllib
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from flowdrop_tui.core.control import notice_retries, process
from flowdrop_tui.core.control.lineage import RUN_ENV
from flowdrop_tui.core.files import locks
from flowdrop_tui.core.files.atomic import open_fd, write_atomic
from flowdrop_tui.core.paths import Layout, refuse_link
from flowdrop_tui.core.times import now_iso

CONFIG = "config.toml"
SETTLE = 0.3  # seconds of quiet before the first notice goes (what comes with it joins it)
DEBOUNCE = 2.0  # after a delivery, what arrives within this is held and merged
DEBOUNCE_MAX = 10.0  # a spool that never goes quiet is delivered after this anyway
SINK_TIMEOUT = 10.0  # one sink, at most
MARKS = "notices"  # in a run's record folder: one file per notice sent
# In a worker's worktree: the space's [notify] as a JSON table, placed by the worker
# from PostgreSQL before each run (docs/remote.md, "Notices"); it stands for [notify].
SPACE_SETTINGS = "space-notify.json"
KNOWN = ("command", "webhook", "desktop", "terminal", "completed", "retry", "timeout")


@dataclass
class Settings:
    """``[notify]`` of ``.flowdrop/config.toml``."""

    command: list[str] | None = None
    webhook: str | None = None
    desktop: bool = False
    terminal: bool = False
    completed: bool = False
    retry: tuple[float, ...] = notice_retries.RETRY  # the waits before each further try
    timeout: float = SINK_TIMEOUT
    problems: list[str] = field(default_factory=list)

    @property
    def sends(self) -> bool:
        """Whether any sink outside this process is named (``terminal`` is the UI's)."""
        return bool(self.command or self.webhook or self.desktop)


def settings(layout: Layout) -> Settings:
    """``[notify]`` as configured; what cannot be used is left out and said in
    ``problems`` (a notice setting never stops a run or a view). In a worker's worktree
    the space's settings (``SPACE_SETTINGS``, placed from PostgreSQL) stand instead."""
    if os.path.lexists(layout.root / SPACE_SETTINGS):
        placed, problem = _placed(layout)
        found = parsed(placed.get("notify") or {})
        found.problems += [problem] if problem else []
        return found
    found = Settings()
    path = layout.root / CONFIG
    try:
        refuse_link(path)
        with open(path, "rb") as handle:
            table = tomllib.load(handle).get("notify")
    except FileNotFoundError:
        return found
    except (OSError, tomllib.TOMLDecodeError) as exc:
        found.problems.append(f"{path} could not be read: {exc}")
        return found
    if table is None:
        return found
    if not isinstance(table, dict):
        found.problems.append(f"{path}: [notify] is not a table")
        return found
    return parsed(table)


def _placed(layout: Layout) -> tuple[dict[str, Any], str | None]:
    """``SPACE_SETTINGS``: ``{"v": 1, "notify": {…}, "sender": folder or null}``."""
    path = layout.root / SPACE_SETTINGS
    try:
        refuse_link(path)
        placed = orjson.loads(path.read_bytes())
    except FileNotFoundError:
        return {}, None
    except (OSError, orjson.JSONDecodeError) as exc:
        return {}, f"{path} could not be read: {exc}"
    if not isinstance(placed, dict) or not isinstance(placed.get("notify"), dict):
        return {}, f"{path} does not hold the space's [notify] table"
    return placed, None


def sending(layout: Layout) -> Layout:
    """Where this workspace's notices are spooled and sent from: itself, or for a
    worker's worktree the worker's own folder for the space (a worktree is moved or
    removed once its run ends, maybe before its sender is done)."""
    sender = _placed(layout)[0].get("sender")
    return Layout(Path(sender)) if isinstance(sender, str) and sender else layout


def parsed(table: dict[str, Any]) -> Settings:
    """The settings a ``[notify]`` table names (the same keys locally and for a space);
    what cannot be used is left out and said in ``problems``."""
    found = Settings()
    command = table.get("command")
    if command is not None:
        if isinstance(command, list) and command and all(isinstance(c, str) for c in command):
            found.command = list(command)
        else:
            found.problems.append('[notify] command must be a list of strings: ["prog", "arg"]')
    webhook = table.get("webhook")
    if webhook is not None:
        if isinstance(webhook, str) and webhook.startswith(("http://", "https://")):
            found.webhook = webhook
        else:
            found.problems.append("[notify] webhook must be an http:// or https:// URL")
    for name in ("desktop", "terminal", "completed"):
        value = table.get(name, False)
        if isinstance(value, bool):
            setattr(found, name, value)
        else:
            found.problems.append(f"[notify] {name} must be true or false")
    retry = table.get("retry")
    if retry is not None:
        if isinstance(retry, list) and all(_seconds(w, 0.0, 86400.0) for w in retry):
            found.retry = tuple(float(w) for w in retry)
        else:
            found.problems.append("[notify] retry must be a list of seconds: [10, 30, 90]")
    timeout = table.get("timeout")
    if timeout is not None:
        if _seconds(timeout, 0.0, 3600.0) and timeout > 0:
            found.timeout = float(timeout)
        else:
            found.problems.append("[notify] timeout must be seconds, more than 0")
    unknown = sorted(set(table) - set(KNOWN))
    if unknown:
        found.problems.append(f"[notify] does not know {', '.join(unknown)}")
    return found


def _seconds(value: Any, low: float, high: float) -> bool:
    return not isinstance(value, bool) and isinstance(value, int | float) and low <= value <= high


def notice(run: str, flow: str | None, name: str, kind: str, message: str) -> dict[str, Any]:
    return {
        "id": f"{run}/{name}",
        "run": run,
        "flow": flow,
        "kind": kind,
        "message": message,
        "at": now_iso(),
    }


def claim(run_dir: Path, name: str, content: dict[str, Any]) -> bool:
    """Create ``notices/<name>`` in the run's folder, exclusively: True for the one
    process that created it (it sends the notice), False for every other."""
    folder = run_dir / MARKS
    refuse_link(run_dir)
    with contextlib.suppress(FileExistsError):
        folder.mkdir()
    refuse_link(folder)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fd = open_fd(folder / name, flags)
    except FileExistsError:
        return False
    try:
        os.write(fd, orjson.dumps(content) + b"\n")
    finally:
        os.close(fd)
    return True


def sent(run_dir: Path, name: str) -> bool:
    return os.path.lexists(run_dir / MARKS / name)


def announce(
    layout: Layout,
    run_dir: Path,
    name: str,
    body: dict[str, Any],
    found: Settings | None = None,
    *,
    record: Callable[[], object] | None = None,
) -> bool:
    """Send ``body`` once, if this process is the first to claim it and a sink is
    configured (``found``: ``[notify]`` as already read). Whether this process sent it.
    ``record``: write the ledger's line before the notice goes (a run on a worker: its
    ``notice_sent`` is in PostgreSQL before anything is sent, so a worker that picks the
    run up never sends it again; if it cannot be written, nothing is sent).
    Raises ``OSError`` when the mark cannot be written (the caller says so as a warning)."""
    found = settings(layout) if found is None else found
    if not found.sends:
        return False
    if not claim(run_dir, name, {**body, "by": os.getpid()}):
        return False
    if record is not None:
        record()
    spool(layout, body)
    return True


def _folder(layout: Layout, *parts: str) -> Path:
    return layout.folder(layout.root.joinpath(MARKS, *parts))


def spool(layout: Layout, body: dict[str, Any]) -> None:
    """Hand a claimed notice to the sender, and start one (it exits at once when another
    is already delivering: that one takes this notice too)."""
    layout = sending(layout)
    folder = _folder(layout, "spool")
    write_atomic(folder / f"{time.time_ns()}-{secrets.token_hex(4)}.json", orjson.dumps(body))
    start_sender(layout)


def start_sender(layout: Layout) -> None:
    log = open_fd(_folder(layout) / "sender.log", os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    env = {k: v for k, v in os.environ.items() if k != RUN_ENV}  # a sink is not the run's
    try:
        child = subprocess.Popen(
            [sys.executable, "-m", "flowdrop_tui.core.control.notify", str(layout.workspace)],
            cwd=layout.workspace,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            start_new_session=True,
            env=env,
        )
    finally:
        os.close(log)
    threading.Thread(target=child.wait, daemon=True).start()  # reaped, never waited on


# -- the sender -------------------------------------------------------------------------


def deliver(layout: Layout) -> None:
    """Deliver what the spool holds, debounced, and the retries as they fall due, while
    no other sender does; stay while a retry waits."""
    lock = _folder(layout) / "deliver.lock"
    spooled = _folder(layout, "spool")
    swept = False
    while True:
        try:
            locks.acquire(lock)
        except locks.LockHeld:
            return  # the holder looks at the spool again after it lets go
        try:
            if not swept:  # once: a later `.trying` may be this process's own straggler
                notice_retries.sweep(layout)
                swept = True
            while True:
                batch = _quiet_batch(spooled)
                while batch:
                    send_all(layout, settings(layout), merged(batch))
                    time.sleep(DEBOUNCE)  # what comes meanwhile is one burst
                    batch = _take(spooled, {p.name for p in spooled.iterdir()})
                due = notice_retries.take_due(layout)
                if due:
                    retry_all(layout, settings(layout), due)
                    continue
                if notice_retries.next_due(layout) is None:
                    break
                _wait(spooled, layout)
        finally:
            locks.release(lock)
        if not any(spooled.iterdir()) and notice_retries.next_due(layout) is None:
            return


def _wait(spooled: Path, layout: Layout) -> None:
    """Until the next retry is due or a notice is spooled (checked each ``SETTLE`` s)."""
    while not any(p.suffix == ".json" for p in spooled.iterdir()):
        due = notice_retries.next_due(layout)
        if due is None or due <= time.time():
            return
        time.sleep(min(SETTLE, max(0.0, due - time.time())))


def pending(layout: Layout) -> bool:
    """Whether retries wait with no sender to try them (it died): ``inbox`` starts one."""
    if not (layout.root / MARKS / "retry").is_dir() or not notice_retries.pending(layout):
        return False
    return locks.holder_pid(_folder(layout) / "deliver.lock") is None


def _quiet_batch(spooled: Path) -> list[dict[str, Any]]:
    began = time.monotonic()
    seen: set[str] = set()
    while True:
        names = {p.name for p in spooled.iterdir() if p.suffix == ".json"}
        if names == seen or time.monotonic() - began >= DEBOUNCE_MAX:
            break
        seen = names
        time.sleep(SETTLE)
    return _take(spooled, seen)


def _take(spooled: Path, names: set[str]) -> list[dict[str, Any]]:
    batch = []
    for name in sorted(n for n in names if n.endswith(".json")):
        path = spooled / name
        with contextlib.suppress(OSError, orjson.JSONDecodeError):
            batch.append(orjson.loads(path.read_bytes()))
        with contextlib.suppress(OSError):
            path.unlink()
    return [b for b in batch if isinstance(b, dict)]


def merged(batch: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One notice per run: a run's burst is its last notice, naming the ones before."""
    by_run: dict[Any, list[dict[str, Any]]] = {}
    for body in batch:
        by_run.setdefault(body.get("run"), []).append(body)
    out = []
    for bodies in by_run.values():
        last = dict(bodies[-1])
        if len(bodies) > 1:
            last["merged"] = [b.get("id") for b in bodies[:-1]]
            last["message"] += (
                " (and: " + "; ".join(str(b.get("message")) for b in bodies[:-1]) + ")"
            )
        out.append(last)
    return out


def send_all(layout: Layout, found: Settings, bodies: list[dict[str, Any]]) -> None:
    """Each body to each sink, once (a sink that fails is tried again later)."""
    tries: list[tuple[str, dict[str, Any], int, notice_retries.Retry | None]] = []
    for body in bodies:
        for kind in ("command", "webhook", "desktop"):
            tries.append((kind, body, 1, None))
    _run(layout, found, tries)


def retry_all(layout: Layout, found: Settings, due: list[notice_retries.Retry]) -> None:
    _run(layout, found, [(r.sink, r.body, r.tries + 1, r) for r in due])


def _target(found: Settings, kind: str) -> Any:
    """The sink ``kind`` as configured now (a retry takes a fixed setting), or None."""
    if kind == "command":
        return found.command
    if kind == "webhook":
        return found.webhook
    if kind == "desktop" and found.desktop and shutil.which("notify-send"):
        return "notify-send"
    return None


def _run(
    layout: Layout,
    found: Settings,
    tries: list[tuple[str, dict[str, Any], int, notice_retries.Retry | None]],
) -> None:
    threads = []
    for kind, body, count, retry in tries:
        target = _target(found, kind)
        if target is None:
            notice_retries.settle(retry)  # the sink is no longer configured
            continue
        args = (layout, found, kind, body, target, count, retry)
        threads.append(threading.Thread(target=_one, args=args, daemon=True))
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(found.timeout + 2)


def _one(
    layout: Layout,
    found: Settings,
    kind: str,
    body: dict[str, Any],
    target: Any,
    count: int,
    retry: notice_retries.Retry | None,
) -> None:
    """Try number ``count`` of one sink; a failure is recorded and tried again later."""
    data = orjson.dumps(body)
    try:
        if kind == "command":
            _command(layout, target, data, found.timeout)
        elif kind == "webhook":
            request = urllib.request.Request(
                target, data=data, headers={"Content-Type": "application/json"}, method="POST"
            )
            with urllib.request.urlopen(request, timeout=found.timeout) as answer:
                answer.read()
        else:
            title = f"flowdrop: {body.get('flow')}"
            _command(layout, ["notify-send", title, str(body.get("message"))], b"", found.timeout)
    except (OSError, subprocess.SubprocessError, ValueError) as exc:
        _failed(layout, kind, body, exc, count)
        with contextlib.suppress(OSError):
            notice_retries.failed(layout, kind, body, count, str(exc)[:500], found.retry)
    notice_retries.settle(retry)


def _command(layout: Layout, argv: list[str], data: bytes, timeout: float) -> None:
    """Run a command sink to its exit: ``data`` on its stdin, in a group of its own.

    Delivered when it exits 0. Its input and error output are files, not pipes, so a
    child it leaves running (holding them open) keeps nothing waiting; past
    ``timeout`` its whole group is killed (what it started with it)."""
    with tempfile.TemporaryFile() as stdin, tempfile.TemporaryFile() as errors:
        stdin.write(data)
        stdin.seek(0)
        child = subprocess.Popen(
            argv,
            stdin=stdin,
            stdout=subprocess.DEVNULL,
            stderr=errors,
            cwd=layout.workspace,
            start_new_session=True,
        )
        try:
            code = child.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill_group(child.pid)
            child.wait()
            said = f"{argv[0]} did not exit in {timeout:g} s (its group was killed)"
            raise OSError(said) from None
        if code != 0:
            errors.seek(0, os.SEEK_END)
            errors.seek(max(0, errors.tell() - 300))
            tail = errors.read().decode(errors="replace").strip()
            raise OSError(f"{argv[0]} exited with {code}: {tail}")


def _failed(
    layout: Layout, kind: str, body: dict[str, Any], exc: BaseException, count: int
) -> None:
    line = {
        "t": now_iso(),
        "id": body.get("id"),
        "sink": kind,
        "try": count,
        "error": str(exc)[:500],
    }
    with contextlib.suppress(OSError):
        fd = open_fd(_folder(layout) / "failures.jsonl", os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        try:
            os.write(fd, orjson.dumps(line) + b"\n")
        finally:
            os.close(fd)


if __name__ == "__main__":
    deliver(Layout(Path(sys.argv[1])))
