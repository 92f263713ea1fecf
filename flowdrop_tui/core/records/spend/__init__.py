"""What runs spend and may spend: budgets, session usage, usage-limit windows,
and the progress streaks the stall checks read.
"""
