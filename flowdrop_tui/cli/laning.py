"""``lanes`` and ``lanes drop``: seeing a flow's lanes and removing one's worktree,
never its unsaved work (SPEC §23)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import orjson

from flowdrop_tui.cli import workspace
from flowdrop_tui.cli.output import dump
from flowdrop_tui.cli.parser import Parser
from flowdrop_tui.format import tokens

HEADERS = ["LANE", "STATUS", "ROUND", "AHEAD/BEHIND", "TREE", "LANDED", "PROGRESS/RESULT", "TOKENS"]


def lanes_arguments(verb: Parser) -> None:
    verb.description = "Each lane of the workspace (of FLOW only, when given)."
    verb.add_argument("flow", metavar="FLOW", nargs="?", help="only this flow's lanes")


def cmd_lanes(args: argparse.Namespace) -> int:
    from flowdrop_tui.core.errors import NotFoundError
    from flowdrop_tui.core.flows.discovery import resolve_flow
    from flowdrop_tui.core.lanes.overview import rows

    layout = workspace.read_layout(args)
    flow = args.flow
    if flow is not None:
        try:
            flow = resolve_flow(layout, flow, Path.cwd()).key  # a name or a path to it
        except NotFoundError:
            if not rows(layout, flow):  # a name that exists nowhere: exit 2, as everywhere
                raise
    found = rows(layout, flow)
    print(dump(found) if args.json else lanes_text(found, flow))
    return 0


def lanes_drop_arguments(verb: Parser) -> None:
    verb.description = (
        "Remove a lane's worktree: only when its tree is clean and its branch holds no "
        "commit that is not merged (or pushed), unless --archive saves them first."
    )
    verb.add_argument("key", metavar="FLOW@LANE", help="the lane")
    verb.add_argument(
        "--archive",
        action="store_true",
        help="first save unmerged commits (a git bundle) and uncommitted changes (a patch) "
        "in .flowdrop/lanes/",
    )
    verb.add_argument(
        "--delete-branch",
        dest="delete_branch",
        action="store_true",
        help="delete the lane's branch too (only once merged or archived)",
    )
    verb.add_argument("--dry-run", action="store_true", help="say what would be done; do nothing")


def cmd_lanes_drop(args: argparse.Namespace) -> int:
    from flowdrop_tui.core.lanes.cleanup import drop

    done = drop(
        workspace.read_layout(args),
        args.key,
        archive=args.archive,
        delete_branch=args.delete_branch,
        dry_run=args.dry_run,
    )
    print(dump(done) if args.json else drop_text(done))
    return 0


def lanes_text(found: list[dict[str, Any]], flow: str | None) -> str:
    """The lanes as a table; none said plainly, with how to start some."""
    if not found:
        name = flow or "FLOW"
        where = f" of {flow}" if flow else ""
        return f"no lanes{where}; start some with: flowdrop-tui run {name} --lanes 3"
    table = [HEADERS] + [_cells(row) for row in found]
    widths = [max(len(line[i]) for line in table) for i in range(len(HEADERS))]
    return "\n".join(
        "  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip()
        for line in table
    )


def _cells(row: dict[str, Any]) -> list[str]:
    ahead, behind = row["ahead"], row["behind"]
    tree = "gone" if not row["exists"] else ("dirty" if row["dirty"] else "clean")
    if row.get("note"):
        tree = row["note"]
    if row["dropped"]:
        tree = "dropped"
    landed = row["landed"]
    told = row["result"] if row["result"] is not None else row["progress"]
    return [
        row["key"],
        str(row["status"] or "—"),
        str(row["round"]),
        "—" if ahead is None else f"+{ahead}/-{behind}",
        tree,
        f"{landed['method']} → {landed['into']}" if landed else "—",
        "—" if told is None else _short(told),
        tokens(row["tokens"]) if row["tokens"] else "—",
    ]


def _short(value: Any, width: int = 30) -> str:
    text = value if isinstance(value, str) else orjson.dumps(value, default=str).decode()
    return text if len(text) <= width else text[: width - 1] + "…"


def drop_text(done: dict[str, Any]) -> str:
    """What ``lanes drop`` did (or, ``--dry-run``, would do), and why."""
    tree, branch, archive = done["worktree"], done["branch"], done["archive"]
    dry = done["dry_run"]
    lines = [f"lane {done['key']}" + (" (dry run: nothing changed)" if dry else "")]
    if archive:
        commits, files = archive.get("commits") or 0, len(archive.get("files") or [])
        where = f" in {archive['folder']}" if "folder" in archive else ""
        saved = f"{commits} commit(s), {files} changed file(s)"
        lines.append(f"  archived{' (would be)' if dry else ''}: {saved}{where}")
    for what, name, part in (("worktree", "path", tree), ("branch", "name", branch)):
        act = (
            f"would be {part['done']}"
            if dry and part["done"] in ("removed", "deleted")
            else part["done"]
        )
        lines.append(f"  {what} {part[name]}: {act} ({part['why']})")
    return "\n".join(lines)
