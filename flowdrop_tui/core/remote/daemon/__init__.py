"""The ``worker`` daemon and what runs in it: its activities, the warm run child,
the worktrees, and the run child's write-through to PostgreSQL.
"""
