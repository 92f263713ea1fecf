"""The ``@flow`` decorator and loading a flow's module in this process.

Only a process that is going to *run* a flow imports it; listing flows asks a
child process instead (``describe.py``), so a broken or hanging flow cannot
hurt the caller.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import os
import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar, overload

from flowdrop_tui.core.errors import FlowLoadError
from flowdrop_tui.core.records.spend.budget import Limits, check_budget, check_limit_wait
from flowdrop_tui.core.records.spend.progress import DEFAULT_STALL, check_stall, check_stall_on
from flowdrop_tui.core.times import now_iso

F = TypeVar("F", bound=Callable[..., Any])
MARK = "__flowdrop_flow__"
PACKAGE = str(Path(__file__).resolve().parents[2]) + os.sep  # flowdrop_tui/ itself


@dataclass(frozen=True)
class FlowDeclaration:
    resumable: bool = False
    description: str = ""
    budget: tuple[tuple[str, float | int | None], ...] = ()  # (kind, limit) pairs: hashable
    limit_wait: float | None = None  # SPEC §19: seconds; None: the default (12 h)
    stall: int | None = DEFAULT_STALL  # SPEC §20: rounds in a row before a pause; None: off
    stall_on: str = "agent"  # SPEC §20: which rounds count toward stalled: "agent", "all"
    lanes: int | None = None  # SPEC §23: a plain `run FLOW` starts lanes 1..N
    setup: tuple[str, ...] = ()  # SPEC §23: one command run in a new lane's worktree

    @property
    def limits(self) -> Limits:
        """The declared budget (SPEC §14) as ``{"rounds": N, ...}``."""
        return dict(self.budget)


MAX_LANES = 64


def _check_lanes(lanes: object) -> int | None:
    if lanes is None:
        return None
    if isinstance(lanes, bool) or not isinstance(lanes, int) or not 1 <= lanes <= MAX_LANES:
        raise TypeError(f"@flow(lanes=...) takes a whole number 1..{MAX_LANES}, not {lanes!r}")
    return lanes


def _check_setup(setup: object) -> tuple[str, ...]:
    if setup is None:
        return ()
    if (
        not isinstance(setup, list | tuple)
        or not setup
        or not all(isinstance(word, str) and word for word in setup)
    ):
        raise TypeError(
            "@flow(setup=...) takes one command as a list of strings (no shell), "
            f'like ["npm", "ci"], not {setup!r}'
        )
    return tuple(setup)


@dataclass(frozen=True)
class LoadedFlow:
    function: Callable[..., Any]
    declaration: FlowDeclaration
    file: Path


@overload
def flow(function: F, /) -> F: ...
@overload
def flow(
    *,
    resumable: bool = False,
    description: str = "",
    budget: dict[str, Any] | None = None,
    limit_wait: str | float | None = None,
    stall: int | None = DEFAULT_STALL,
    stall_on: str = "agent",
    lanes: int | None = None,
    setup: list[str] | tuple[str, ...] | None = None,
) -> Callable[[F], F]: ...
def flow(
    function: Callable[..., Any] | None = None,
    /,
    *,
    resumable: bool = False,
    description: str = "",
    budget: dict[str, Any] | None = None,
    limit_wait: str | float | None = None,
    stall: int | None = DEFAULT_STALL,
    stall_on: str = "agent",
    lanes: int | None = None,
    setup: list[str] | tuple[str, ...] | None = None,
) -> Any:
    """Declare a flow: ``@flow(resumable=True, description="...", budget={"rounds": 50})``
    on its one function. ``budget`` limits its whole chain (SPEC §14): ``rounds``
    started, ``minutes`` of running time, ``tokens`` its sessions reported.
    ``limit_wait`` caps one wait for a backend's usage limit (SPEC §19): ``"12h"``
    (the default), ``"90m"``, seconds; ``0`` hands a limited result to the flow.
    ``stall`` (SPEC §20): after that many rounds in a row with no change, or failing
    the same way, the run pauses (default 5; ``None`` never). Only rounds that opened an
    agent session (``claude``, ``codex``, a plug-in backend reporting usage) count
    toward "no change"; ``stall_on="all"`` counts every round (a plain loop opting in).
    ``lanes=N`` (SPEC §23, 1..64): a plain ``run FLOW`` starts lanes 1..N, each in its
    own worktree; ``setup=["npm", "ci"]`` (one command, no shell) runs in a lane's new
    worktree before its first round."""
    if not isinstance(resumable, bool):
        raise TypeError(f"@flow(resumable=...) takes True or False, not {resumable!r}")
    if not isinstance(description, str):
        raise TypeError(f"@flow(description=...) takes a string, not {description!r}")
    try:
        limits = check_budget(budget)
        stall = check_stall(stall)
        stall_on = check_stall_on(stall_on)
    except ValueError as exc:
        raise TypeError(str(exc)) from None
    try:
        cap = None if limit_wait is None else check_limit_wait(limit_wait, "@flow(limit_wait=...)")
    except ValueError as exc:
        raise TypeError(str(exc)) from None
    declaration = FlowDeclaration(
        lanes=_check_lanes(lanes),
        setup=_check_setup(setup),
        resumable=resumable,
        description=description,
        budget=tuple(sorted(limits.items())),
        limit_wait=cap,
        stall=stall,
        stall_on=stall_on,
    )

    def mark(target: F) -> F:
        if not callable(target):
            raise TypeError("@flow decorates a function")
        setattr(target, MARK, declaration)
        return target

    return mark(function) if function is not None else mark


def frame_in_flow(exc: BaseException, file: Path) -> traceback.FrameSummary | None:
    """The innermost traceback frame of ``exc`` in the flow's own folder, if any."""
    folder = str(file.parent) + os.sep
    frames = traceback.extract_tb(exc.__traceback__)
    return next((f for f in reversed(frames) if f.filename.startswith(folder)), None)


def print_flow_traceback(exc: BaseException, out: Any) -> None:
    """``exc``'s traceback from the flow's own frame: the frames of flowdrop_tui that
    called the flow (the run's machinery, the same in every run) are left out, as
    Python leaves out its own runpy frames; frames below the flow's — a ``run.…`` that
    raised — stay. All of it when no frame is outside flowdrop_tui."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename.startswith(PACKAGE):
        tb = tb.tb_next
    traceback.print_exception(type(exc), exc, tb or exc.__traceback__, file=out)


def _where(exc: BaseException, file: Path) -> tuple[str, int | None]:
    """The file and line in the flow's own folder closest to where ``exc`` happened."""
    if isinstance(exc, SyntaxError) and exc.filename:
        return exc.filename, exc.lineno
    frame = frame_in_flow(exc, file)
    return (frame.filename, frame.lineno) if frame is not None else (str(file), None)


def describe_error(exc: BaseException, file: Path, workspace: Path | None = None) -> dict[str, Any]:
    """A load failure as plain data: file (workspace-relative when possible), line, message."""
    where, line = _where(exc, file)
    if workspace is not None:
        with contextlib.suppress(ValueError, OSError):
            where = Path(where).resolve().relative_to(workspace.resolve()).as_posix()
    if isinstance(exc, SyntaxError):
        message = f"SyntaxError: {exc.msg}"
    else:
        message = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    text = f"{where}:{line}: {message}" if line else f"{where}: {message}"
    return {"file": where, "line": line, "message": message, "text": text}


def _shown(file: Path, workspace: Path | None) -> str:
    """``file`` as a user would name it: workspace-relative when it is inside."""
    if workspace is not None:
        try:
            return file.resolve().relative_to(workspace.resolve()).as_posix()
        except (ValueError, OSError):
            pass
    return str(file)


def find_flow_function(
    module: Any, module_name: str, file: Path, workspace: Path | None = None
) -> LoadedFlow:
    found = [
        value
        for value in vars(module).values()
        if callable(value)
        and isinstance(getattr(value, MARK, None), FlowDeclaration)
        and getattr(value, "__module__", None) == module_name
    ]
    if not found:
        raise FlowLoadError(
            f"{_shown(file, workspace)}: no @flow function "
            "(decorate exactly one function with @flow)"
        )
    if len(found) > 1:
        names = ", ".join(getattr(f, "__name__", "?") for f in found)
        raise FlowLoadError(
            f"{_shown(file, workspace)}: more than one @flow function ({names}); keep exactly one"
        )
    function = found[0]
    return LoadedFlow(function, getattr(function, MARK), file)


def module_name_for(file: Path) -> str:
    digest = hashlib.sha1(str(file.resolve()).encode()).hexdigest()[:12]
    return f"flowdrop_flow_{digest}"


def load_flow(file: Path, workspace: Path | None = None) -> LoadedFlow:
    """Import ``file`` and return its one ``@flow`` function; ``FlowLoadError`` names file:line."""
    name = module_name_for(file)
    if name in sys.modules:
        return find_flow_function(sys.modules[name], name, file, workspace)
    spec = importlib.util.spec_from_file_location(name, file)
    if spec is None or spec.loader is None:
        raise FlowLoadError(f"{file}: cannot be loaded as a Python module")
    module = importlib.util.module_from_spec(spec)
    folder = str(file.parent)
    if folder not in sys.path:
        sys.path.insert(0, folder)  # a flow may import helpers that sit beside it
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException as exc:
        sys.modules.pop(name, None)
        if isinstance(exc, KeyboardInterrupt):
            raise
        raise FlowLoadError(describe_error(exc, file, workspace)["text"]) from exc
    return find_flow_function(module, name, file, workspace)


def error_info(exc: BaseException, file: Path) -> dict[str, Any]:
    """A flow's exception as the record keeps it: type, message, and where in the flow."""
    where = frame_in_flow(exc, file)
    if where is None:
        frames = traceback.extract_tb(exc.__traceback__)
        where = frames[-1] if frames else None
    return {
        "type": type(exc).__name__,
        "message": str(exc),
        "file": where.filename if where else None,
        "line": where.lineno if where else None,
        "at": now_iso(),
    }
