"""The core never imports Textual or Rich: a flow must not pay for the UI."""

from __future__ import annotations

import subprocess
import sys


def test_importing_flowdrop_tui_loads_no_ui_library() -> None:
    """Guards against a core module (or the public API) pulling in textual or rich."""
    code = (
        "import sys, flowdrop_tui, flowdrop_tui.cli\n"
        "import flowdrop_tui.core.runner, flowdrop_tui.core.views, flowdrop_tui.core.control\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('textual', 'rich'))\n"
        "print(','.join(bad))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == ""
