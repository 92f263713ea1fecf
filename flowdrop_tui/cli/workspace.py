"""The workspace a command works on, and its mode — chosen once per command.

``mode(args)`` asks ``core.mode.choose`` the first time and keeps the answer on
``args`` for the rest of the command, so one command never sees two modes (the
config read once). ``read_layout`` is the workspace to read, brought up to date
first (remote mode: its replica synced; nothing to do locally)."""

from __future__ import annotations

import argparse

from flowdrop_tui.core.mode import Mode, choose
from flowdrop_tui.core.paths import Layout, find_workspace


def layout(args: argparse.Namespace) -> Layout:
    found: Layout | None = getattr(args, "layout", None)
    if found is None:
        found = args.layout = Layout(find_workspace(override=getattr(args, "workspace", None)))
    return found


def mode(args: argparse.Namespace) -> Mode:
    chosen: Mode | None = getattr(args, "mode", None)
    if chosen is None:
        chosen = args.mode = choose(layout(args))
    return chosen


def chosen_mode(args: argparse.Namespace | None) -> Mode | None:
    """The mode this command chose, if it needed one."""
    return getattr(args, "mode", None) if args is not None else None


def read_layout(
    args: argparse.Namespace, *, run_refs: bool = False, run: str | None = None
) -> Layout:
    """The workspace to read; in remote mode its replica is brought up to date first
    (``run_refs``: also the commits workers pushed, ``run``: only that run's), so every
    read answers as locally."""
    for problem in mode(args).sync(run_refs=run_refs, run=run):
        args.warnings.add(problem)
    return layout(args)
