"""The ``claude`` backend: Claude Code run non-interactively (``claude -p``).

Where Claude Code keeps the transcript (see docs/sessions.md for the sources):
``<config>/projects/<cwd, every non-alphanumeric character as "-">/<session-id>.jsonl``
where ``<config>`` is ``$CLAUDE_CONFIG_DIR`` when set, else ``~/.claude``. The
session id is chosen here and passed with ``--session-id``, so the file's name
is known before the CLI starts; the project folder's spelling is Claude Code's
business, so when the file is not where that rule says, it is looked up by name
under ``projects/``. Either way it is linked, never copied.
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
from flowdrop_tui.core.sessions.session import Session


def config_dir(env: dict[str, str]) -> Path:
    value = env.get("CLAUDE_CONFIG_DIR")
    return Path(os.path.expanduser(value)) if value else home(env) / ".claude"


def project_folder(cwd: Path) -> str:
    """Claude Code's name for a working directory's folder under ``projects/``."""
    return re.sub(r"[^A-Za-z0-9]", "-", os.path.realpath(cwd))


def transcript_path(env: dict[str, str], cwd: Path, session_id: str) -> Path:
    return config_dir(env) / "projects" / project_folder(cwd) / f"{session_id}.jsonl"


def locate(env: dict[str, str], expected: Path) -> Path | None:
    if expected.exists():
        return expected
    found = sorted((config_dir(env) / "projects").glob(f"*/{expected.name}"))
    return found[0] if found else None


def final_text(stdout: bytes) -> tuple[str, str | None]:
    """The answer from ``--output-format json`` (or the last ``result`` of stream-json);
    plain text output is the answer as it is."""
    for line in reversed(stdout.splitlines() or [b""]):
        try:
            message = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue
        if isinstance(message, dict) and message.get("type") == "result":
            text = message.get("result")
            text = text if isinstance(text, str) else ""
            error = (text or str(message.get("subtype"))) if message.get("is_error") else None
            return text, error
    return stdout.decode(errors="replace"), None


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
            code = session.wait(child)
            out.seek(0)
            err.seek(0)
            stdout, stderr = out.read(), err.read()
        found = locate(env, expected)
        if found is not None:
            session.link(found)
        text, error = final_text(stdout)
        if code != 0 and error is None:
            error = tail(stderr) or tail(stdout) or f"claude exited with {code}"
        return Reply(code, text, error)
