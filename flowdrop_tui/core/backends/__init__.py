"""The built-in session backends: ``command``, ``claude`` and ``codex`` (SPEC §9).

Each is a small class with a ``name`` and a ``run(session, prompt_or_argv,
options)`` method (the :class:`~flowdrop_tui.core.sessions.Backend` protocol);
``core.sessions`` loads them by name, along with any installed through the
``flowdrop_tui.backends`` entry-point group.
"""
