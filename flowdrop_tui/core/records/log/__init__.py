"""A run's append-only files: ``cycle.jsonl`` written and read, its growing tail,
and ``output.log``.
"""
