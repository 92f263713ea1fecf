"""Textual's private names stay in ``tui/textual_compat.py``: a Textual upgrade has one
file to check, and each use there says why it is needed and on which version."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import textual
from textual.app import App
from textual.screen import ModalScreen, Screen
from textual.widget import Widget

import flowdrop_tui.tui

TUI = Path(flowdrop_tui.tui.__file__).parent
COMPAT = TUI / "textual_compat.py"

PRIVATE = r"_[A-Za-z]\w*"  # one underscore: a dunder is Python's, not Textual's
DEFINED = re.compile(rf"\bdef ({PRIVATE})|\bself\.({PRIVATE})\s*(?::[^=\n]*)?=(?!=)")
# `x._name` and `getattr(x, "_name")`
USED = re.compile(rf"\.({PRIVATE})\b|getattr\([^,()]+,\s*[\"']({PRIVATE})[\"']")


def _names(pattern: re.Pattern[str], text: str) -> set[str]:
    return {a or b for a, b in pattern.findall(text)}


def textual_private_names() -> set[str]:
    """Every private method or attribute Textual defines."""
    root = Path(textual.__file__).parent
    found: set[str] = set()
    for path in root.rglob("*.py"):
        found |= _names(DEFINED, path.read_text(encoding="utf-8"))
    return found


def ui_modules() -> list[Path]:
    return sorted(path for path in TUI.rglob("*.py") if path != COMPAT)


def test_no_textual_private_name_is_used_outside_the_compat_module() -> None:
    """Guards against ``obj._textual_thing`` creeping back into the UI: a private name
    used in tui/ that the UI does not define itself must be Textual's."""
    textual_names = textual_private_names()
    assert {"_merge_bindings", "_forward_event", "_notifications"} <= textual_names
    texts = {path: path.read_text(encoding="utf-8") for path in ui_modules()}
    own = set().union(*(_names(DEFINED, text) for text in texts.values()))
    found = [
        f"{path.relative_to(TUI)}:{number}: {line.strip()}"
        for path, text in texts.items()
        for number, line in enumerate(text.splitlines(), 1)
        if any(n in textual_names and n not in own for n in _names(USED, line))
    ]
    assert found == [], "Textual private names outside textual_compat.py:\n" + "\n".join(found)


def test_no_class_overrides_a_textual_private_name() -> None:
    """Guards against overriding a private handler (``_on_key``): declare ``@on(...)``
    instead, or put it behind the compat module."""
    generated = set()  # what Textual's metaclass puts on every subclass
    for base in (Widget, Screen, ModalScreen, App):
        probe = type("Probe", (base,), {})
        generated |= {name for name in vars(probe) if name.startswith("_")}
    found = []
    for path in ui_modules():
        parts = path.relative_to(TUI.parent.parent).with_suffix("").parts
        module = importlib.import_module(".".join(p for p in parts if p != "__init__"))
        for cls in vars(module).values():
            if not isinstance(cls, type) or cls.__module__ != module.__name__:
                continue
            bases = [b for b in cls.__mro__[1:] if b.__module__.split(".")[0] == "textual"]
            for name in vars(cls):
                if name.startswith("__") or not name.startswith("_") or name in generated:
                    continue
                if any(name in vars(base) for base in bases):
                    found.append(f"{module.__name__}.{cls.__name__}.{name}")
    assert found == []
