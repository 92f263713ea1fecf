"""A flow's own state: ``state.json`` and its ``state.log``, the nesting limit,
and the FlowDrop snapshot shape.
"""
