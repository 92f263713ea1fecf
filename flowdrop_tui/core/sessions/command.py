"""The ``command`` backend: an argv (or a shell string) run in the workspace.

Its transcript is what the command prints, stdout and stderr interleaved as it
arrives, written straight into ``.flowdrop/transcripts/<session-id>.log`` by the
process itself: flowdrop keeps this one because nobody else does.
"""

from __future__ import annotations

import os
import shlex
import subprocess
from typing import Any

from flowdrop_tui.core.errors import FlowdropError
from flowdrop_tui.core.sessions.agent_cli import check_options, environment, working_dir
from flowdrop_tui.core.sessions.base import Reply
from flowdrop_tui.core.sessions.session import Session, open_file_exclusive

OPTIONS = ("shell", "cwd", "env")


class CommandBackend:
    name = "command"

    def run(self, session: Session, prompt_or_argv: Any, options: dict[str, Any]) -> Reply:
        check_options(self.name, options, OPTIONS)
        shell = bool(options.get("shell", False))
        argv: Any = prompt_or_argv
        if shell:
            if not isinstance(argv, str) or not argv.strip():
                raise FlowdropError("session('command', ..., shell=True) takes a command string")
            command: list[str] | str = argv
            shown = argv
        else:
            if isinstance(argv, str):
                argv = shlex.split(argv)
            if (
                isinstance(argv, bytes)
                or not argv
                or not all(isinstance(a, str | os.PathLike) for a in argv)
            ):
                raise FlowdropError("session('command', argv) takes a non-empty list of strings")
            command = [os.fspath(a) for a in argv]
            shown = shlex.join(command)
        env = environment(options)
        cwd = working_dir(options, session.workspace)
        transcript = session.transcripts / f"{session.id}.log"
        with open_file_exclusive(transcript) as out:
            session.open(command=shown, transcript=transcript)
            try:
                child = session.spawn(
                    command,
                    shell=shell,
                    cwd=cwd,
                    env=env,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                )
            except OSError as exc:
                raise FlowdropError(
                    f"session could not start {shown!r}: {exc.strerror or exc}"
                ) from exc
            code = session.wait(child)
        return Reply(code, transcript.read_text(errors="replace"))
