"""One run's record as a whole: its folder (made, deleted), whether it is alive,
its events folded into a ``RunInfo`` (and that fold cached), following it, and
what its thread spent (from its fold).
"""
