"""LangGraph graphs on flowdrop records (SPEC §22): ``FlowdropSaver``.

Needs the ``langgraph`` extra (``pip install 'flowdrop-tui[langgraph]'``); nothing else
in flowdrop-tui imports this package.
"""

from flowdrop_tui.langgraph.graph_runs import GraphStopped
from flowdrop_tui.langgraph.saver import FlowdropSaver

__all__ = ["FlowdropSaver", "GraphStopped"]
