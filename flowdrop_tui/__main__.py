"""``python -m flowdrop_tui``: the same as the ``flowdrop-tui`` command."""

from __future__ import annotations

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
