"""The ``codex`` backend: OpenAI Codex run non-interactively (``codex exec --json``).

Where Codex keeps the transcript (its "rollout"; see docs/sessions.md for the
sources): ``<home>/sessions/YYYY/MM/DD/rollout-YYYY-MM-DDThh-mm-ss-<thread id>.jsonl``,
dated by the session's local start time, where ``<home>`` is ``$CODEX_HOME``
when set, else ``~/.codex``. Codex picks the thread id itself and announces it
as the first ``--json`` event (``thread.started``); the link is made as soon as
the rollout with that id appears, and never copied.
"""

from __future__ import annotations

import datetime as dt
import os
import shlex
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import IO, Any

import orjson

from flowdrop_tui.core.sessions.agent_cli import (
    AGENT_OPTIONS,
    check_options,
    environment,
    extra_args,
    find_cli,
    home,
    prompt_text,
    tail,
    working_dir,
)
from flowdrop_tui.core.sessions.base import Reply
from flowdrop_tui.core.sessions.limit_signs import Limited, codex_limit, rollout_reset
from flowdrop_tui.core.sessions.session import Session

_MESSAGE_TYPES = ("agent_message", "assistant_message")  # the second: older Codex releases
ROLLOUT_SETTLE = 2.0  # seconds a limit's reset is looked for in a rollout still being written


def codex_home(env: dict[str, str]) -> Path:
    value = env.get("CODEX_HOME")
    return Path(os.path.expanduser(value)) if value else home(env) / ".codex"


def locate(env: dict[str, str], thread_id: str, *, everywhere: bool) -> Path | None:
    """The rollout of ``thread_id``: in today's or yesterday's folder (a session that
    began just before midnight), or, with ``everywhere``, in any dated folder."""
    sessions = codex_home(env) / "sessions"
    pattern = f"rollout-*-{thread_id}.jsonl"
    today = dt.date.today()
    try:
        for day in (today, today - dt.timedelta(days=1)):
            folder = sessions / f"{day:%Y}" / f"{day:%m}" / f"{day:%d}"
            found = sorted(folder.glob(pattern))
            if found:
                return found[0]
        if everywhere:
            found = sorted(sessions.glob(f"*/*/*/{pattern}"))
            return found[0] if found else None
    except OSError:  # an unreadable home: not found, never a failed session
        return None
    return None


class _Events:
    """What ``codex exec --json`` says, line by line."""

    def __init__(self) -> None:
        self.thread_id: str | None = None
        self.text: str | None = None
        self.error: str | None = None
        self.plain: list[str] = []

    def read(self, stream: IO[bytes]) -> None:
        with stream:
            for line in stream:
                self.feed(line)

    def feed(self, line: bytes) -> None:
        try:
            event = orjson.loads(line)
        except orjson.JSONDecodeError:
            if line.strip():
                self.plain.append(line.decode(errors="replace").rstrip("\n"))
            return
        if not isinstance(event, dict):
            return
        kind = event.get("type")
        if kind == "thread.started" and isinstance(event.get("thread_id"), str):
            self.thread_id = event["thread_id"]
        elif kind == "item.completed" and isinstance(event.get("item"), dict):
            item = event["item"]
            if (item.get("type") or item.get("item_type")) in _MESSAGE_TYPES:
                text = item.get("text")
                self.text = text if isinstance(text, str) else self.text
        elif kind == "turn.failed" and isinstance(event.get("error"), dict):
            self.error = str(event["error"].get("message") or "the turn failed")
        elif kind == "error":
            self.error = str(event.get("message") or "codex reported an error")


class CodexBackend:
    name = "codex"

    def run(self, session: Session, prompt_or_argv: Any, options: dict[str, Any]) -> Reply:
        check_options(self.name, options, AGENT_OPTIONS)
        prompt = prompt_text(self.name, prompt_or_argv)
        env = environment(options)
        executable = find_cli(self.name, "OpenAI Codex", options, env)
        cwd = working_dir(options, session.workspace)
        argv = [executable, "exec", "--json"]
        if options.get("model"):
            argv += ["--model", str(options["model"])]
        argv += extra_args(self.name, options)
        argv += ["--", prompt] if prompt.startswith("-") else [prompt]
        session.open(command=shlex.join(["codex", *argv[1:]]), suffix=".jsonl")
        events = _Events()

        def look() -> None:  # the rollout appears once Codex writes to it
            if events.thread_id and session.target is None:
                self._link(session, env, events.thread_id, everywhere=False)

        with tempfile.TemporaryFile() as err:
            child = session.spawn(argv, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=err)
            # A thread reads the events so the pipe never fills while the run waits
            # (and stays able to take an interrupt).
            reader = threading.Thread(target=events.read, args=(child.stdout,), daemon=True)
            reader.start()
            try:
                code = session.wait(child, tick=look)
            finally:
                reader.join(timeout=5)
                if events.thread_id and session.target is None:
                    self._link(session, env, events.thread_id, everywhere=True)
                if session.target is None and "--ephemeral" not in argv:
                    session.warn(
                        "Codex's rollout for this session was not found "
                        + (
                            f"(thread {events.thread_id}, under {codex_home(env) / 'sessions'})"
                            if events.thread_id
                            else "(Codex announced no thread id)"
                        )
                        + "; the session is recorded without it"
                    )
            err.seek(0)
            stderr = err.read()
        text = events.text if events.text is not None else "\n".join(events.plain)
        error = events.error
        if code != 0 and error is None:
            error = tail(stderr) or f"codex exited with {code}"
        # The error events only: never the answer (an agent may talk about limits).
        limited = codex_limit(code, events.error, session.target)
        if limited is not None and "--ephemeral" not in argv and not rollout_reset(session.target):
            limited = self._settled(session, env, events, code, limited)
        return Reply(code, text, error, limited=limited)

    @staticmethod
    def _settled(
        session: Session, env: dict[str, str], events: _Events, code: int, limited: Limited
    ) -> Limited:
        """A limit met with no reset read from the rollout: Codex writes its rollout from
        a task of its own, so the line with ``resets_at`` (exact to the second) may land
        a moment after the process has gone. Look again for up to ``ROLLOUT_SETTLE``
        before settling for its message's "try again at 6:55 PM" (to the minute)."""
        deadline = time.monotonic() + ROLLOUT_SETTLE
        while time.monotonic() < deadline:
            time.sleep(0.1)
            if session.target is None and events.thread_id:
                CodexBackend._link(session, env, events.thread_id, everywhere=True)
            if rollout_reset(session.target) is not None:
                return codex_limit(code, events.error, session.target) or limited
        return limited

    @staticmethod
    def _link(session: Session, env: dict[str, str], thread_id: str, *, everywhere: bool) -> None:
        found = locate(env, thread_id, everywhere=everywhere)
        if found is not None:
            session.link(found)
