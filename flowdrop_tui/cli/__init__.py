"""The ``flowdrop-tui`` command: ``main`` parses, hands the verb to its module, and
says a failure as one line (and, with ``--json``, ``{"error": {"code", "message"}}``).

A module per group of verbs, each imported when its verb is asked (the terminal UI
only for the bare command), declaring its verbs' arguments and running them; which
verb lives where is ``cli/verb_registry.py``, the registry. The workspace's mode (local or
remote) is chosen once per command, in ``workspace.mode``.

Exit codes (SPEC §11): 0 done (completed, paused, or started detached); 1 the
flow failed or could not be loaded; 2 usage error or something named does not
exist; 3 refused; 4 a server of remote mode could not be reached; 130 stopped
(cancelled). ``errors.exit_code`` is the one place an error becomes one. A reader
that closed the pipe early (``runs --json | head``) changes none of these: the
command exits quietly with the status it had (``output.stdout_closed``).
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable, Sequence

from flowdrop_tui.cli.ending import WithoutTeardown, failed, leave
from flowdrop_tui.cli.output import Warnings, stdout_failed
from flowdrop_tui.cli.parser import parse
from flowdrop_tui.cli.verb_registry import BY_NAME, WORDS, function_name
from flowdrop_tui.cli.workspace import chosen_mode
from flowdrop_tui.core import gc_pause
from flowdrop_tui.core.errors import FlowdropError
from flowdrop_tui.core.mode import install_run_mirror

UI = ("serving", "cmd_ui")  # the bare command


def handler(verb: str | None) -> Callable[[argparse.Namespace], int | WithoutTeardown]:
    """``verb``'s ``cmd_*`` (``cli/verb_registry.py``), its module imported now; none: the UI's."""
    found_verb = BY_NAME.get(verb or "")
    module, name = (found_verb.module, f"cmd_{function_name(verb or '')}") if found_verb else UI
    found: Callable[[argparse.Namespace], int | WithoutTeardown] = getattr(
        importlib.import_module(f"{__name__}.{module}"), name
    )
    return found


def verb_of(args: argparse.Namespace) -> str | None:
    """The verb ``args`` asks: ``run``; ``remote config notify`` for one of several words."""
    verb: str | None = args.command
    while verb in WORDS:
        verb = f"{verb} {getattr(args, WORDS[verb].dest)}"
    return verb


def main(argv: Sequence[str] | None = None) -> int:
    holder: list[argparse.Namespace] = []
    gc_pause.pause()  # until the verb runs, or the UI's first frame (core/gc_pause.py)
    try:
        ended = _main(argv, holder)
    finally:
        gc_pause.resume()
    mode = chosen_mode(holder[0] if holder else None)
    code = ended.code if isinstance(ended, WithoutTeardown) else ended
    if isinstance(ended, WithoutTeardown) or (mode is not None and mode.exit_without_teardown):
        leave(code)
    return code


def _main(argv: Sequence[str] | None, holder: list[argparse.Namespace]) -> int | WithoutTeardown:
    argv = list(sys.argv[1:] if argv is None else argv)
    as_json = "--json" in argv
    warnings = Warnings()
    try:
        install_run_mirror()  # a run child on a worker (docs/remote.md): before any write
        args = parse(argv)
        args.warnings = warnings
        holder.append(args)
        if args.command is not None:
            gc_pause.resume()  # a verb may run a flow for hours: only the UI starts paused
        ended = handler(verb_of(args))(args)
        try:
            sys.stdout.flush()  # here, not at exit: a failure is said, and the status kept
        except (OSError, ValueError) as exc:
            stdout_failed(exc)
        return ended
    except (FlowdropError, KeyboardInterrupt, BrokenPipeError) as exc:
        return failed(exc, as_json, warnings)
