"""The browser face: the terminal UI served with textual-serve (``flowdrop-tui serve``).

Like ``tui/``, nothing in ``core/`` imports it; ``cli/serving.py`` imports it only for ``serve``.
"""
