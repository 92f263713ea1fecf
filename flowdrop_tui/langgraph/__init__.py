"""LangGraph graphs on flowdrop records (SPEC §22): ``FlowdropSaver``.

Needs the ``langgraph`` extra (``pip install 'flowdrop-tui[langgraph]'``); nothing else
in flowdrop-tui imports this package.
"""

try:
    from flowdrop_tui.langgraph.graph_runs import GraphStopped
    from flowdrop_tui.langgraph.saver import FlowdropSaver
except ImportError as exc:  # the extra is not installed: say how to get it
    if (exc.name or "").split(".")[0] not in ("langgraph", "langchain_core"):
        raise
    raise ImportError(
        f"FlowdropSaver needs LangGraph ({exc.name} is not installed): "
        "pip install 'flowdrop-tui[langgraph]'",
        name=exc.name,
    ) from exc

__all__ = ["FlowdropSaver", "GraphStopped"]
