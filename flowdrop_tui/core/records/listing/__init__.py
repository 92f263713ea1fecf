"""The workspace's lists of runs: the index, each key's run list, the flow's pages
(catalog), the ledger of ended runs, pins.
"""
