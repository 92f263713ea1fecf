"""What the agent-CLI backends share: options, the environment, finding the CLI."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

from flowdrop_tui.core.errors import BackendUnavailableError, FlowdropError

AGENT_OPTIONS = ("model", "args", "env", "cwd", "executable")
TAIL = 2000  # characters of stderr kept as a failed session's error


def check_options(backend: str, options: dict[str, Any], allowed: tuple[str, ...]) -> None:
    """Refuse an option the backend does not know (a typo would otherwise vanish)."""
    unknown = sorted(set(options) - set(allowed))
    if unknown:
        raise FlowdropError(
            f"session({backend!r}) does not take {', '.join(unknown)}; "
            f"its options are: {', '.join(allowed)}"
        )


def environment(options: dict[str, Any]) -> dict[str, str]:
    """The run's environment plus the session's ``env`` option."""
    env = dict(os.environ)
    extra = options.get("env") or {}
    if not isinstance(extra, dict):
        raise FlowdropError("a session's env option is a dict of names to values")
    env.update({str(k): str(v) for k, v in extra.items()})
    return env


def extra_args(backend: str, options: dict[str, Any]) -> list[str]:
    args = options.get("args") or []
    if isinstance(args, str) or not all(isinstance(a, str) for a in args):
        raise FlowdropError(f"session({backend!r}, args=...) takes a list of strings")
    return list(args)


def prompt_text(backend: str, prompt: Any) -> str:
    if not isinstance(prompt, str) or not prompt.strip():
        raise FlowdropError(f"session({backend!r}, prompt) takes the prompt as a non-empty string")
    return prompt


def find_cli(backend: str, product: str, options: dict[str, Any], env: dict[str, str]) -> str:
    """The CLI's executable, or a clear error naming it when it is not installed."""
    wanted = str(options.get("executable") or backend)
    found = shutil.which(wanted, path=env.get("PATH", os.defpath))
    if found is None:
        raise BackendUnavailableError(
            f"the {backend} session backend runs the `{wanted}` command ({product}), "
            f"which is not installed or not on PATH; install it, or pass "
            f"executable='/path/to/{backend}' to run.session"
        )
    return found


def home(env: dict[str, str]) -> Path:
    """The home folder the CLI will see (its ``HOME``, as the CLI itself reads it)."""
    value = env.get("HOME")
    return Path(value) if value else Path.home()


def working_dir(options: dict[str, Any], default: Path) -> Path:
    return Path(os.path.abspath(options.get("cwd") or default))


def tail(data: bytes) -> str:
    text = data.decode(errors="replace").strip()
    return text[-TAIL:]
