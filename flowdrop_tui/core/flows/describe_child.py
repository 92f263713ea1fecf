"""The child side of describing a flow: ``python -m flowdrop_tui.core.flows.describe_child FILE``.

Imports the flow in this throwaway process and prints one JSON line with its
declaration or its load error. Whatever the flow prints while loading goes to
stderr, so it cannot corrupt the answer.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import orjson

from flowdrop_tui.core.errors import FlowLoadError
from flowdrop_tui.core.flows.declaration import describe_error, load_flow


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    file = Path(args[0])
    workspace = Path(args[1]) if len(args) > 1 else None
    answer_fd = os.dup(1)
    os.dup2(2, 1)  # the flow's own prints go to stderr, not into the answer
    sys.stdout = sys.stderr
    try:
        loaded = load_flow(file, workspace)
        answer = {
            "ok": True,
            "function": getattr(loaded.function, "__name__", "?"),
            "resumable": loaded.declaration.resumable,
            "description": loaded.declaration.description,
            "budget": loaded.declaration.limits,
        }
    except FlowLoadError as exc:
        cause = exc.__cause__
        detail = describe_error(cause, file, workspace) if cause else {"text": exc.message}
        answer = {"ok": False, "error": detail.get("text", exc.message), **detail}
    except BaseException as exc:  # pragma: no cover - anything else is still an answer
        answer = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
    os.write(answer_fd, orjson.dumps(answer, default=str) + b"\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
