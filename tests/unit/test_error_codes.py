"""The one error family: a class per code, every code documented, one exit-status map."""

from __future__ import annotations

import importlib
import pkgutil
import re
from pathlib import Path

import pytest

import flowdrop_tui
from flowdrop_tui.core import errors
from flowdrop_tui.core.errors import FlowdropError, error_for, exit_code

SPEC = Path(__file__).resolve().parents[2] / "docs" / "spec.md"
ROW = re.compile(r"^\| `([A-Z_]+)` \| (\d+) \|", re.MULTILINE)


def every_error_class() -> dict[str, type[FlowdropError]]:
    """Import every module (remote ones too), then read the registry of codes."""
    for found in pkgutil.walk_packages(flowdrop_tui.__path__, "flowdrop_tui."):
        if found.name.startswith(("flowdrop_tui.tui", "flowdrop_tui.serve")):
            continue  # faces: no error classes of their own
        if found.name.endswith("__main__"):
            continue
        importlib.import_module(found.name)
    return dict(FlowdropError.by_code)


def test_each_code_is_one_class_and_documented_with_its_exit_status() -> None:
    """Guards against two classes answering with one code (a script could not tell
    them apart), a code the docs do not list, or a documented exit status the code
    does not give."""
    classes = every_error_class()
    documented = {code: int(status) for code, status in ROW.findall(SPEC.read_text())}
    assert set(classes) == set(documented), (
        f"undocumented: {sorted(set(classes) - set(documented))}; "
        f"documented but no class: {sorted(set(documented) - set(classes))}"
    )
    for code, cls in classes.items():
        error = error_for(code, "words")
        assert type(error) is cls and error.code == code and error.message == "words"
        assert error.exit_code == documented[code], code


def test_a_second_class_cannot_take_a_code() -> None:
    """Guards the rule where it is made: declaring a taken code fails at once."""
    with pytest.raises(TypeError, match="ALREADY_RUNNING"):

        class Again(errors.RefusedError):
            code = "ALREADY_RUNNING"


def test_exit_codes_are_decided_in_one_place() -> None:
    """Guards the statuses scripts rely on (SPEC §11), 4 included, and that no class
    sets its own."""
    assert exit_code(errors.UsageError("x")) == 2
    assert exit_code(errors.InvalidNameError("x")) == 2
    assert exit_code(errors.NoStateForKeyError("x")) == 2
    assert exit_code(errors.AlreadyRunningError("x")) == 3
    assert exit_code(errors.TerminalSnapshotError("x")) == 3
    assert exit_code(errors.UnreachableError("x")) == 4
    assert exit_code(errors.FlowLoadError("x")) == 1
    assert exit_code(ValueError("x")) == 1
    for cls in every_error_class().values():
        assert "exit_code" not in vars(cls), f"{cls.__name__} sets its own exit status"


def test_an_unknown_reported_code_is_still_an_error_with_its_words() -> None:
    """Guards a refusal from a newer worker with a code this client does not know:
    said with its words, exit 1, never a crash."""
    error = error_for("SOMETHING_NEW", "a newer refusal")
    assert isinstance(error, FlowdropError) and error.message == "a newer refusal"
    assert error.exit_code == 1
