"""The ``claude`` backend: Claude Code run non-interactively (``claude -p``).

Where Claude Code keeps the transcript (docs/sessions.md has the sources and
what was verified against the real CLI):
``<config>/projects/<folder>/<session-id>.jsonl`` where ``<config>`` is
``$CLAUDE_CONFIG_DIR`` when set, else ``~/.claude``, and ``<folder>`` is
:func:`project_folder` of the working directory. The session id is chosen here
and passed with ``--session-id``, so the file's name is known before the CLI
starts; should a release spell the folder otherwise, the file is looked up by
name under ``projects/``. Either way it is linked, never copied; a transcript
that cannot be found is a warning, never a failed session.
"""

from __future__ import annotations

import os
import re
import shlex
import tempfile
import uuid
from pathlib import Path
from typing import Any

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
from flowdrop_tui.core.sessions.limit_signs import (
    GrowingLines,
    claude_going_on,
    claude_inside_wait,
    claude_limit,
)
from flowdrop_tui.core.sessions.session import Session


def config_dir(env: dict[str, str]) -> Path:
    value = env.get("CLAUDE_CONFIG_DIR")
    return Path(os.path.expanduser(value)) if value else home(env) / ".claude"


FOLDER_LIMIT = 200  # Claude Code's cut; longer names get "-" and a hash of the path
_BASE36 = "0123456789abcdefghijklmnopqrstuvwxyz"
_OVERRIDE = re.compile(r"[A-Za-z0-9_-]{1,64}")
_RESERVED = re.compile(r"(?:con|prn|aux|nul|com[0-9]|lpt[0-9])", re.IGNORECASE)


def _utf16_units(text: str) -> list[int]:
    """``text`` as JavaScript sees it: UTF-16 code units (an emoji is two)."""
    data = text.encode("utf-16-le", errors="surrogatepass")
    return [int.from_bytes(data[i : i + 2], "little") for i in range(0, len(data), 2)]


def _path_hash(units: list[int]) -> str:
    """Claude Code's hash of a path: Java's ``String.hashCode`` over UTF-16 units as a
    32-bit signed integer, its absolute value in base 36."""
    value = 0
    for unit in units:
        value = (value * 31 + unit) & 0xFFFFFFFF
    value = abs(value - (1 << 32) if value >= 1 << 31 else value)
    digits = ""
    while True:
        value, rest = divmod(value, 36)
        digits = _BASE36[rest] + digits
        if not value:
            return digits


def folder_name(path: str) -> str:
    """Claude Code's name for ``path``'s folder under ``projects/``.

    As Claude Code 2.1.332 computes it (its ``J$``): every UTF-16 unit of the path
    that is not an ASCII letter or digit becomes ``-`` (so a character outside the
    Basic Multilingual Plane, an emoji, becomes two); a name longer than 200 is cut
    to 200 and gets ``-`` and :func:`_path_hash` of the whole path.
    """
    units = _utf16_units(path)
    name = "".join(chr(u) if chr(u).isascii() and chr(u).isalnum() else "-" for u in units)
    if len(name) <= FOLDER_LIMIT:
        return name
    return f"{name[:FOLDER_LIMIT]}-{_path_hash(units)}"


def project_folder(cwd: Path, env: dict[str, str] | None = None) -> str:
    """The folder Claude Code keeps ``cwd``'s transcripts in: its real path, named by
    :func:`folder_name` — or, with ``CLAUDE_CONFIG_DIR`` set, the name given in
    ``CLAUDE_CODE_PROJECT_DIR_NAME`` when that is a safe one (as Claude Code reads it)."""
    env = env or {}
    override = env.get("CLAUDE_CODE_PROJECT_DIR_NAME")
    if (
        env.get("CLAUDE_CONFIG_DIR")
        and override
        and _OVERRIDE.fullmatch(override)
        and not _RESERVED.fullmatch(override)
    ):
        return override
    return folder_name(os.path.realpath(cwd))


def transcript_path(env: dict[str, str], cwd: Path, session_id: str) -> Path:
    return config_dir(env) / "projects" / project_folder(cwd, env) / f"{session_id}.jsonl"


def locate(env: dict[str, str], expected: Path) -> Path | None:
    """The transcript: where the rule says, else the file of that name in any project
    folder. A name the file system refuses (too long) is simply not found."""
    try:
        if expected.exists():
            return expected
        found = sorted((config_dir(env) / "projects").glob(f"*/{expected.name}"))
    except OSError:
        return None
    return found[0] if found else None


def final_text(stdout: bytes) -> tuple[str, str | None]:
    """The answer from ``--output-format json`` (or the last ``result`` of stream-json);
    plain text output is the answer as it is. JSON with no ``result`` (what Claude
    Code prints when interrupted: usage and cost, no answer) is no answer."""
    json_seen = False
    for line in reversed(stdout.splitlines() or [b""]):
        try:
            message = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue
        if not isinstance(message, dict):
            continue
        json_seen = True
        if message.get("type") == "result":
            text = message.get("result")
            text = text if isinstance(text, str) else ""
            error = (text or str(message.get("subtype"))) if message.get("is_error") else None
            return text, error
    return ("" if json_seen else stdout.decode(errors="replace")), None


WATCH_EVERY = 0.5  # seconds between looks at what a running session wrote


class _Watch:
    """What Claude Code writes while it runs, read as it comes: its transcript (where
    2.1.332 says it was refused at a limit and will retry) and its output (``stream-json``
    says so too, when a flow asks for that format). A wait inside the session is
    recorded as it begins and ends (``Session.waiting``), so the run shows it."""

    def __init__(self, session: Session, transcript: Path, out: int) -> None:
        self.session = session
        self.sources = (GrowingLines(transcript), GrowingLines(fd=out))

    def look(self) -> None:
        for source in self.sources:
            for line in source.new_lines():
                wait = claude_inside_wait(line)
                if wait is not None:
                    self.session.waiting(wait.until, wait.source)
                elif claude_going_on(line):
                    self.session.waiting_over("open")


class ClaudeBackend:
    name = "claude"

    def run(self, session: Session, prompt_or_argv: Any, options: dict[str, Any]) -> Reply:
        check_options(self.name, options, AGENT_OPTIONS)
        prompt = prompt_text(self.name, prompt_or_argv)
        env = environment(options)
        executable = find_cli(self.name, "Claude Code", options, env)
        cwd = working_dir(options, session.workspace)
        session_id = str(uuid.uuid4())
        argv = [executable, "-p", prompt, "--output-format", "json", "--session-id", session_id]
        if options.get("model"):
            argv += ["--model", str(options["model"])]
        argv += extra_args(self.name, options)
        expected = transcript_path(env, cwd, session_id)
        session.open(command=shlex.join(["claude", *argv[1:]]), transcript=expected)
        with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
            child = session.spawn(argv, cwd=cwd, env=env, stdout=out, stderr=err)
            watch = _Watch(session, expected, out.fileno())

            def tick() -> None:
                watch.look()
                session.leave_if_asked(child)  # a stop or pause during a wait inside it

            code = session.wait(child, tick=tick, every=WATCH_EVERY)
            watch.look()  # what it wrote last
            out.seek(0)
            err.seek(0)
            stdout, stderr = out.read(), err.read()
        found = locate(env, expected)
        if found is not None:
            session.link(found)
        else:
            session.warn(
                f"Claude Code's transcript for session {session_id} was not found "
                f"(looked for {expected} and for {expected.name} under "
                f"{config_dir(env) / 'projects'}); the session is recorded without it"
            )
        text, error = final_text(stdout)
        if code != 0 and error is None:
            error = tail(stderr) or tail(stdout) or f"claude exited with {code}"
        return Reply(code, text, error, limited=claude_limit(code, stdout, found))
