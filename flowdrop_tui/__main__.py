"""``python -m flowdrop_tui``: the same as the ``flowdrop-tui`` command."""

from __future__ import annotations

import sys

from flowdrop_tui.cli import main

if __name__ == "__main__":
    sys.exit(main())
