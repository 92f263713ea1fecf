"""Numbers the command line states as its defaults, in a module that imports nothing:
building the parser (every command, and the UI's start) must not load the modules
that use them (bench/README.md, (c))."""

from __future__ import annotations

DEFAULT_KEEP = 20  # prune keeps the newest this many runs of each flow
RUNS_PAGE = 50  # `runs` shows the newest page; --limit N or --all for more
LOG_PAGE = 1000  # `logs --json` answers in pages of this many lines (--limit, --after)
