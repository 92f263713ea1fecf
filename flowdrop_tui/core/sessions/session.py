"""The handle a backend works through: events, the link, processes in the run's group.

Everything here is the same for every backend, so a backend only decides what
to run and where its transcript is. Nothing is ever written through a link in
``sessions/``: links are only created, or replaced by renaming a new one over.
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import IO, Any

from flowdrop_tui.core.errors import FlowdropError
from flowdrop_tui.core.paths import CYCLE, SESSIONS
from flowdrop_tui.core.records.log.event_lines import count_named
from flowdrop_tui.core.records.spend.limit_windows import iso
from flowdrop_tui.core.records.spend.progress import AGENT_BACKENDS
from flowdrop_tui.core.records.spend.usage import Usage, read_usage
from flowdrop_tui.core.sessions.host import SessionFrame, SessionHost

SAID_TAIL = 300  # characters of a failed session's last words shown for it (SPEC §20)

# Zero-padded so a plain sort of sessions/ is the opening order, even for a loop
# that opens a session every minute for a year.
LINK_DIGITS = 6
INTERRUPT_GRACE = 5.0  # a session process that outlives Ctrl-C this long is killed
_SHOWN_LIMIT = 4000  # longest command text recorded in session_opened


# -- numbering --------------------------------------------------------------------------

_counter_lock = threading.Lock()
_NUMBERED = re.compile(r"^(\d+)-")


def _next_number(host: SessionHost) -> int:
    """One past every session this run has opened, in this process or an earlier one
    (a paused run resumed by a new process keeps counting, never reusing a number)."""
    with _counter_lock:
        last = host.sessions_opened
        if last is None:
            # streamed, never parsed: a week-long record is looked through in about a second
            last = count_named(host.run_dir / CYCLE, "session_opened")
            try:
                names = os.listdir(host.run_dir / SESSIONS)
            except OSError:
                names = []
            for name in names:
                match = _NUMBERED.match(name)
                if match:
                    last = max(last, int(match.group(1)))
        host.sessions_opened = last + 1
        return last + 1


# -- the handle a backend works through ---------------------------------------------------


class Session:
    """One session of one run, as its backend sees it."""

    def __init__(self, host: SessionHost, frame: SessionFrame, backend: str) -> None:
        self._host = host
        self._frame = frame
        self.backend = backend
        self._number: int | None = None
        self.workspace = host.layout.checkout  # a lane's worktree (SPEC §23)
        self.link_path: Path | None = None
        self.target: Path | None = None
        self.opened = False
        self.interrupted = False
        self.exit_code: int | None = None  # of the last process waited for
        self.usage: Usage | None = None  # what it spent, once closed
        self._began = 0.0
        # SPEC §19: a wait inside the CLI's own session, while it lasts: (monotonic
        # start, until it said); see ``waiting``
        self._inside: tuple[float, datetime | None] | None = None
        # a stop or pause asked for during that wait: the run leaves once it closes
        self.leaving: str | None = None
        self._leave_sent = 0.0  # monotonic time the process was interrupted for it

    @property
    def number(self) -> int:
        """This session's place in the run's opening order, taken when first needed
        (so a session refused before it starts leaves no gap)."""
        if self._number is None:
            self._number = _next_number(self._host)
        return self._number

    @property
    def id(self) -> str:
        return f"{self._host.run_id}-{self.number:0{LINK_DIGITS}d}"

    @property
    def run_id(self) -> str:
        return self._host.run_id

    @property
    def key(self) -> str:
        return self._frame.key

    @property
    def transcripts(self) -> Path:
        """``.flowdrop/transcripts/``: for a backend whose transcript flowdrop keeps."""
        layout = self._host.layout
        return layout.folder(layout.transcripts)  # never through a link (a planted one)

    def open(
        self, *, command: str | None = None, transcript: Path | None = None, suffix: str = ""
    ) -> None:
        """Record ``session_opened``; link ``transcript`` when it is already known.

        The link's name is fixed here (``sessions/000007-claude.jsonl``): ``suffix``
        names its extension when the transcript is found only later.
        """
        if self.opened:
            return
        ext = transcript.suffix if transcript is not None and not suffix else suffix
        name = f"{self.number:0{LINK_DIGITS}d}-{self.backend}{ext}"
        folder = self._host.run_dir / SESSIONS
        folder.mkdir(exist_ok=True)
        self.link_path = folder / name
        if command is not None and len(command) > _SHOWN_LIMIT:
            command = command[:_SHOWN_LIMIT] + "…"
        self._host.log.append(
            "session_opened",
            session=self.id,
            key=self._frame.key,
            round=self._frame.open_round,
            backend=self.backend,
            command=command,
            link=f"{SESSIONS}/{name}",
            target=str(transcript) if transcript is not None else None,
        )
        self.opened = True
        self._began = time.monotonic()
        if transcript is not None:
            self.link(transcript)

    def link(self, target: Path) -> None:
        """Point this session's link at the backend's transcript (made, or re-pointed).

        Only ever creates or replaces the symlink itself (a new link renamed over
        the old one); nothing is written through a link in ``sessions/``.
        """
        if not self.opened:
            self.open(transcript=target)
            return
        assert self.link_path is not None
        target = Path(os.path.abspath(target))
        if self.target == target and self.link_path.is_symlink():
            return
        fresh = self.link_path.with_name(f".{self.link_path.name}.new")
        try:
            fresh.unlink()
        except FileNotFoundError:
            pass
        # A transcript flowdrop keeps is linked relatively, so the workspace can move.
        root = self._host.layout.root
        shown = os.path.relpath(target, fresh.parent) if target.is_relative_to(root) else target
        os.symlink(shown, fresh)
        os.replace(fresh, self.link_path)
        self.target = target

    def spawn(self, argv: list[str] | str, **popen: Any) -> subprocess.Popen[bytes]:
        """Start a process for this session in the run's process group.

        The run's group is what Ctrl-C and ``stop --now`` signal, so the process
        sees an interrupt exactly when the run does. Opens the session first
        (recording the command) if the backend has not.
        """
        if not self.opened:
            self.open(command=argv if isinstance(argv, str) else shlex.join(argv))
        popen.setdefault("cwd", self.workspace)
        popen.setdefault("stdin", subprocess.DEVNULL)
        if popen.get("start_new_session") or popen.get("process_group") is not None:
            raise FlowdropError("a session process stays in the run's process group")
        child = subprocess.Popen(argv, **popen)
        self._host.children.add(child.pid)
        return child

    def wait(
        self,
        child: subprocess.Popen[Any],
        *,
        tick: Callable[[], None] | None = None,
        every: float = 0.5,
    ) -> int:
        """Wait for ``child``; on an interrupt (stop now, Ctrl-C) let it end, then re-raise.

        The process got the same SIGINT as the run (its group, or passed on by the
        run); it is given a grace period to exit the way it would at a terminal,
        then killed, so the run can still save and end as SPEC §10 says.
        ``tick`` is called every ``every`` seconds while the process runs (a
        backend looking for a transcript that appears only after the start).
        """
        # The process is reaped by a helper thread: an interrupt is raised only in
        # the main thread, and raised between waitpid() returning and Popen storing
        # the status it would lose the exit code for good.
        reaped = threading.Event()
        interrupts = self._host.interrupts

        def reap() -> None:
            try:
                child.wait()
            finally:
                reaped.set()

        threading.Thread(target=reap, name=f"session-{self.number}", daemon=True).start()
        try:
            while not reaped.wait(every if tick is not None else None):
                assert tick is not None
                tick()
        except KeyboardInterrupt:
            self._settle(child, reaped)
            raise
        finally:
            self._host.children.discard(child.pid)
        code = child.returncode
        self.exit_code = code
        if self._host.interrupts != interrupts:
            # Ctrl-C reached the run (and, through the terminal, its whole group) while
            # this process ran. What the CLI makes of it is its own business: Claude
            # Code exits 0, Codex 1, a shell script dies of it. The run asked: interrupted.
            self.interrupted = True
        return int(code)

    def _settle(self, child: subprocess.Popen[Any], reaped: threading.Event) -> None:
        """After an interrupt: give ``child`` its grace period to exit, then kill it.

        Its output must be going to files or to a reader of the backend's own, so
        it cannot block on a full pipe while it winds down.
        """
        self.interrupted = True
        family = process_tree(child.pid)  # before the grace: a parent that exits orphans them
        if not reaped.wait(INTERRUPT_GRACE):
            kill_tree(child.pid, family)
            reaped.wait()
        else:
            kill_tree(None, family)  # whatever it left behind (a child ignoring SIGINT)
        self.exit_code = child.returncode

    def waiting(self, until: datetime | None, source: str) -> None:
        """The CLI was refused at a usage limit and waits inside this session to try
        again itself (SPEC §19): the run is ``waiting`` while the process runs on.
        Records ``limit_wait`` with ``inside: true`` — again only when ``until`` moves
        (a retry refused with a later reset) — and its end (``waiting_over``)."""
        if self._inside is not None and self._inside[1] == until:
            return
        began = self._inside[0] if self._inside is not None else time.monotonic()
        self._inside = (began, until)
        self._host.log.append(
            "limit_wait",
            key=self._frame.key,
            backend=self.backend,
            until=iso(until),
            next_probe=None,
            source=source,
            session=self.id,
            shared=False,
            inside=True,
        )

    def leave_if_asked(self, child: subprocess.Popen[Any]) -> None:
        """While the CLI waits inside this session, a stop or pause asked for ends the
        wait at once, as it ends one of flowdrop's own (SPEC §19): the process gets
        SIGINT, as Ctrl-C would give it (killed with what it started if it outlives
        the grace period), the session closes interrupted, and the run then stops or
        pauses (``open_session``). A backend calls this from its ``wait`` tick."""
        if self.leaving is not None:
            if time.monotonic() - self._leave_sent > INTERRUPT_GRACE and child.poll() is None:
                kill_tree(child.pid, process_tree(child.pid))
            return
        if self._inside is None:
            return
        asked = self._host.hold(0)
        if asked is None:
            return
        self.leaving = asked
        self.interrupted = True
        self._leave_sent = time.monotonic()
        try:
            os.kill(child.pid, signal.SIGINT)
        except ProcessLookupError:
            pass

    def waiting_over(self, outcome: str) -> None:
        """A wait inside the session is over: ``open`` (the model answered), ``limited``
        (the CLI gave up: the run waits on its own), ``ended`` (it ended otherwise)."""
        if self._inside is None:
            return
        began, _ = self._inside
        self._inside = None
        self._host.log.append(
            "limit_wait_ended",
            key=self._frame.key,
            backend=self.backend,
            outcome=outcome,
            seconds=round(time.monotonic() - began, 3),
            session=self.id,
            inside=True,
        )

    def warn(self, message: str) -> None:
        """Record a ``warning`` (kind ``session``): something about this session did not
        go as it should, but the run carries on (a transcript that cannot be found)."""
        self._host.log.append("warning", kind="session", session=self.id, message=message)

    def close(
        self,
        exit_code: int | None,
        error: str | None,
        usage: Usage | None = None,
        limited: dict[str, Any] | None = None,
        said: str | None = None,
    ) -> float:
        """Record ``session_closed`` with what the session spent: ``usage`` when the
        backend reported it, else read from the transcript now (so it outlives the
        transcript's deletion). ``said`` is the reply's text: its tail names a failure
        that has no error text of its own (a ``command``'s output, SPEC §20)."""
        seconds = round(time.monotonic() - self._began, 3)
        if self.leaving is not None:
            self.waiting_over("stopped" if self.leaving == "stop" else "paused")
        elif limited is not None:
            self.waiting_over("limited")
        else:
            self.waiting_over("open" if exit_code == 0 and not self.interrupted else "ended")
        # SPEC §20: an agent session (one that spends tokens) makes its round count
        # toward ``stalled``: the agent CLIs, or a plug-in backend that reported usage
        agent = self.backend in AGENT_BACKENDS or usage is not None
        if usage is None:
            usage = read_usage(self.backend, self.target)
        self.usage = usage
        self._host.log.append(
            "session_closed",
            session=self.id,
            exit_code=exit_code,
            seconds=seconds,
            interrupted=self.interrupted,
            target=str(self.target) if self.target is not None else None,
            error=error,
            usage=usage.to_json() if usage is not None else None,
            **({"limited": limited} if limited is not None else {}),
        )
        self._host.closed_sessions.append(
            {
                "session": self.id,
                "exit_code": exit_code,
                "error": error,
                "agent": agent,
                "tail": said[-SAID_TAIL:] if said else None,
            }
        )
        return seconds


def _start_time(pid: int) -> str | None:
    """The process's start time in clock ticks (``/proc/PID/stat`` field 22): with the
    pid, it names one process, never a later one given the same pid."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            data = stat.read()
    except OSError:
        return None
    fields = data[data.rfind(b")") + 2 :].split()
    return fields[19].decode() if len(fields) > 19 else None


def _children_of() -> dict[int, list[int]]:
    tree: dict[int, list[int]] = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return tree
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as stat:
                data = stat.read()
        except OSError:
            continue
        parent = int(data[data.rfind(b")") + 2 :].split()[1])
        tree.setdefault(parent, []).append(int(name))
    return tree


def process_tree(pid: int) -> dict[int, str]:
    """``pid``'s descendants (not ``pid`` itself), each with its start time.

    On Linux, from ``/proc``; elsewhere empty (the session's own process is still
    killed). A wrapper CLI (Codex's Node launcher on Node < 22.15) runs the real
    program as its child; a kill that reaches only the wrapper orphans it.
    """
    tree = _children_of()
    found: dict[int, str] = {}
    todo = list(tree.get(pid, []))
    while todo:
        child = todo.pop()
        if child in found:
            continue
        started = _start_time(child)
        if started is not None:
            found[child] = started
            todo.extend(tree.get(child, []))
    return found


def kill_tree(pid: int | None, known: dict[int, str]) -> None:
    """SIGKILL ``pid``, its descendants now, and every process of ``known`` still the
    same process (an orphan re-parented away from the tree is still found)."""
    family = dict(known)
    if pid is not None:
        family.update(process_tree(pid))
    targets = [p for p, started in family.items() if _start_time(p) == started]
    if pid is not None:
        targets.insert(0, pid)
    for target in targets:
        try:
            os.kill(target, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def open_file_exclusive(path: Path) -> IO[bytes]:
    """A new file for writing that refuses to reuse a name or follow a link."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | getattr(os, "O_NOFOLLOW", 0)
    return os.fdopen(os.open(path, flags, 0o644), "wb")
