"""How the faces word a diff: what a round changed (``diff RUN --round N``, SPEC §20)
and what a run's state changed against another run's (``diff RUN --state``).

Beside ``format``, which words everything else; the CLI and the UI's ``d`` share these.
"""

from __future__ import annotations

from typing import Any

import orjson

from flowdrop_tui.format import rounds_range


def diff_head(found: dict[str, Any]) -> str:
    """``round 2 of 1–5: 3 files, 4f67232719..9a0b1c2d3e`` (``+ uncommitted``)."""
    start, end = str(found.get("start") or "")[:10], str(found.get("end") or "")[:10]
    span = rounds_range(*(found.get("rounds") or [None, None]))
    files = found.get("files") or []
    only = bool(found.get("commits_only"))
    nothing = "no commits" if only else "no changes"
    count = f"{len(files)} file{'s' if len(files) != 1 else ''}" if files else nothing
    left = " + what it left uncommitted" if found.get("uncommitted") else ""
    return f"round {found.get('round')} of {span}: {count}, {start or '∅'}..{end or '∅'}{left}"


def diff_notes(found: dict[str, Any]) -> list[str]:
    """What a round's diff could not show (SPEC §20): files too big to read, and for a
    round that kept only its commits, that what it left uncommitted is not known."""
    notes = []
    skipped = [str(path) for path in found.get("skipped") or []]
    if skipped:
        notes.append(f"not read (over 8 MiB): {', '.join(skipped)}")
    if found.get("commits_only"):
        notes.append(
            "only its commits are shown: a round with no agent session keeps no "
            "snapshot of what it left uncommitted"
        )
    return notes


def diff_nothing(found: dict[str, Any]) -> str:
    """The words for an empty patch: "changed nothing" only when that is known."""
    if found.get("files"):
        return "no patch text (binary or too big files)"
    if found.get("commits_only") or found.get("skipped"):
        return "this round made no commits"
    return "this round changed nothing"


def diff_text(found: dict[str, Any]) -> str:
    """``diff RUN``: a line about the round, its files, what was left out, the patch."""
    lines = [f"run {found.get('run')} {diff_head(found)}"]
    for row in found.get("files") or []:
        lines.append(f"  {row.get('status'):<12} {row.get('path')}")
    lines.extend(f"  ({note})" for note in diff_notes(found))
    text = "\n".join(lines) + "\n"
    patch = str(found.get("patch") or "")
    return text + ("\n" + patch if patch else "")


def _state_value(value: Any, width: int = 120) -> str:
    text = orjson.dumps(value, default=str).decode()
    return text if len(text) <= width else text[: width - 1] + "…"


def state_diff_lines(found: dict[str, Any]) -> list[str]:
    """``diff RUN --state``: a line saying against what, then a line per name that
    differs — ``+ name = value``, ``~ name: old → new``, ``- name (was value)``."""
    against = f"run {found.get('against')}"
    if found.get("source"):
        against += " (picked up from it)"
    added, changed, removed = (found.get(k) or {} for k in ("added", "changed", "removed"))
    counts = [
        f"{len(what)} {word}"
        for what, word in ((added, "added"), (changed, "changed"), (removed, "removed"))
        if what
    ]
    same = int(found.get("same") or 0)
    said = ", ".join(counts) if counts else "no change"
    lines = [f"state of {found.get('key')} against {against}: {said}, {same} the same"]
    for name, value in added.items():
        lines.append(f"  + {name} = {_state_value(value)}")
    for name, pair in changed.items():
        old, new = _state_value(pair.get("old"), 60), _state_value(pair.get("new"), 60)
        lines.append(f"  ~ {name}: {old} → {new}")
    for name, value in removed.items():
        lines.append(f"  - {name} (was {_state_value(value)})")
    return lines


def state_diff_text(found: dict[str, Any]) -> str:
    return f"run {found.get('run')} " + "\n".join(state_diff_lines(found)) + "\n"
