#!/usr/bin/env python3
"""A usage limit waited out by a loop, with the real Claude Code and Codex (SPEC §19).

Issue 22's "done when": against the mock model closed for a 75 s window (refusing
as the services do at a limit), the README's kind of loop — three rounds, one
agent session each — completes with three good sessions, a recorded
``limit_wait``, and at most three model calls inside the window.

For each backend: a fresh workspace and mock, the window closed, then
``flowdrop-tui run loop`` in the foreground. Claude Code gets a ``retry-after``
the length of the window (over a minute, so it gives up at once, as at a long
limit; no reset time with an API key: flowdrop probes after 1 minute); Codex's
rollout carries the reset (``resets_at``).

    python bench/limit_wait.py                   # both, 75 s window (≈ 3 minutes)
    python bench/limit_wait.py --window 20 --backend codex

Prints one JSON object: per backend the good sessions, the ``limit_wait`` events,
the calls inside the window, the seconds waited and taken, and whether each goal
is met. Exit status 0 when every goal is met.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

import orjson

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.agents_mock import install  # noqa: E402
from tests.agents_mock.server import ANSWER, MockModel  # noqa: E402

LOOP = """
from flowdrop_tui import flow

@flow(description="the README's loop: one agent session a round")
def main(run):
    for n in run.rounds():
        result = run.session({backend!r}, "tidy the README")
        run.state["sessions"] = list(run.state.get("sessions", [])) + [
            {{"ok": result.ok, "text": result.text, "limited": result.limited}}
        ]
        if n >= 3:
            break
"""


def environment(root: Path, url: str, bin_dir: Path) -> dict[str, str]:
    home = root / "home"
    codex_home = home / "codex-home"
    codex_home.mkdir(parents=True)
    (codex_home / "config.toml").write_text(
        textwrap.dedent(f"""\
        model = "gpt-5-codex"
        model_provider = "mock"

        [model_providers.mock]
        name = "mock model on loopback"
        base_url = "{url}/v1"
        wire_api = "responses"
        env_key = "MOCK_MODEL_KEY"

        [features]
        plugins = false

        [analytics]
        enabled = false
        """)
    )
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("ANTHROPIC_", "CLAUDE_", "CODEX_", "OPENAI_", "FLOWDROP_"))
    }
    env.update(
        PATH=f"{bin_dir}{os.pathsep}{env['PATH']}",
        HOME=str(home),
        ANTHROPIC_BASE_URL=url,
        ANTHROPIC_API_KEY="sk-ant-mock",
        CLAUDE_CONFIG_DIR=str(home / "claude-config"),
        DISABLE_AUTOUPDATER="1",
        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
        CODEX_HOME=str(codex_home),
        MOCK_MODEL_KEY="sk-mock",
        HTTP_PROXY="http://127.0.0.1:9",
        HTTPS_PROXY="http://127.0.0.1:9",
        NO_PROXY="127.0.0.1,localhost",
        PYTHONPATH=str(REPO),
    )
    return env


def one(backend: str, window: float, bin_dir: Path) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="flowdrop-limit-") as tmp:
        root = Path(tmp)
        ws = root / "ws"
        (ws / "flows" / "loop").mkdir(parents=True)
        subprocess.run(["git", "init", "-q", "-b", "main"], cwd=ws, check=True)
        (ws / "flows" / "loop" / "flow.py").write_text(LOOP.format(backend=backend))
        mock = MockModel()
        env = environment(root, mock.start(), bin_dir)
        try:
            began = time.time()
            closed = mock.close_window(window)
            done = subprocess.run(
                [sys.executable, "-m", "flowdrop_tui", "run", "loop", "--json"],
                cwd=ws,
                env=env,
                capture_output=True,
                text=True,
                timeout=window * 4 + 600,
            )
            took = time.time() - began
        finally:
            mock.close()
        answer = orjson.loads(done.stdout) if done.stdout.strip() else {}
        run_dir = ws / ".flowdrop" / "runs" / str(answer.get("run"))
        events = [
            orjson.loads(line) for line in (run_dir / "cycle.jsonl").read_bytes().splitlines()
        ]
        state = orjson.loads((run_dir / "state.json").read_bytes())
        sessions = state["loop"]["sessions"]
        waits = [e for e in events if e["event"] == "limit_wait"]
        ended = [e for e in events if e["event"] == "limit_wait_ended"]
        inside = [t for _, t in mock.refused + mock.answered if began <= t < closed.until]
        good = sum(1 for s in sessions if s["ok"] and s["text"] == ANSWER)
        return {
            "backend": backend,
            "window_seconds": window,
            "status": answer.get("status"),
            "exit": done.returncode,
            "good_sessions": good,
            "sessions_opened": sum(1 for e in events if e["event"] == "session_opened"),
            "limit_wait": [
                {k: w.get(k) for k in ("until", "next_probe", "source", "shared")} for w in waits
            ],
            "waited_seconds": round(sum(e.get("seconds") or 0 for e in ended), 1),
            "calls_inside_window": len(inside),
            "calls_refused": len(mock.refused),
            "calls_answered": len(mock.answered),
            "seconds": round(took, 1),
            "minutes_budget_used": (answer.get("budget") or {}).get("minutes", {}).get("used"),
            "goals": {
                "completed": answer.get("status") == "completed",
                "3 good sessions": good == 3,
                "limit_wait recorded": bool(waits),
                "at most 3 calls inside the window": len(inside) <= 3,
            },
        }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--window", type=float, default=75.0, help="seconds closed (75)")
    parser.add_argument("--backend", choices=("claude", "codex"), action="append")
    args = parser.parse_args()
    bin_dir = install.ensure_installed()
    results = [one(b, args.window, bin_dir) for b in args.backend or ["claude", "codex"]]
    met = all(all(r["goals"].values()) for r in results)
    print(
        orjson.dumps({"runs": results, "all_goals_met": met}, option=orjson.OPT_INDENT_2).decode()
    )
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
