"""The LangGraph side of tests/graphs/test_langgraph.py, run as a real process.

``python -m tests.graph_child WORKSPACE COMMAND [ARG]``:

- ``ask``: the review graph up to its ``interrupt()`` (prints ``interrupted``);
- ``answer TEXT``: the same thread resumed with ``Command(resume=TEXT)``;
- ``puts THREAD``: ``put`` after ``put`` on THREAD, each a checkpoint holding its
  number and a big value, printing the number once ``put`` returned (``acked N``);
- ``pairs THREAD TAG N``: N checkpoints on THREAD, each with a ``put_writes``;
- ``spin THREAD``: a graph whose node loops for ever (until stopped).
"""

from __future__ import annotations

import operator
import sys
import time
from typing import Annotated, Any, TypedDict

from langgraph.checkpoint.base import empty_checkpoint
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, interrupt

from flowdrop_tui.langgraph import FlowdropSaver, GraphStopped

PAD = "x" * 400_000  # a put that takes a while: a kill lands inside one


class Review(TypedDict):
    count: int
    answer: str
    notes: Annotated[list[str], operator.add]


def step(state: Review) -> dict[str, Any]:
    return {"count": state["count"] + 1, "notes": [f"step {state['count'] + 1}"]}


def ask(state: Review) -> dict[str, Any]:
    return {"answer": interrupt({"question": "ship it?", "count": state["count"]})}


def review_graph(saver: FlowdropSaver) -> Any:
    graph = StateGraph(Review)
    graph.add_node("step", step)
    graph.add_node("ask", ask)
    graph.add_edge(START, "step")
    graph.add_conditional_edges("step", lambda s: "ask" if s["count"] >= 3 else "step")
    graph.add_edge("ask", END)
    return graph.compile(checkpointer=saver)


class Spin(TypedDict):
    n: int


def spin_graph(saver: FlowdropSaver) -> Any:
    def tick(state: Spin) -> dict[str, Any]:
        time.sleep(0.05)
        return {"n": state["n"] + 1}

    graph = StateGraph(Spin)
    graph.add_node("tick", tick)
    graph.add_edge(START, "tick")
    graph.add_edge("tick", "tick")
    return graph.compile(checkpointer=saver)


def puts(saver: FlowdropSaver, thread: str) -> None:
    latest = saver.get_tuple({"configurable": {"thread_id": thread, "checkpoint_ns": ""}})
    number = latest.checkpoint["channel_values"]["n"] if latest else 0
    config: Any = latest.config if latest else {"configurable": {"thread_id": thread}}
    while True:
        number += 1
        checkpoint = empty_checkpoint()
        checkpoint["channel_values"] = {"n": number, "pad": f"{number}:{PAD}"}
        checkpoint["channel_versions"] = {"n": number, "pad": number}
        config = saver.put(config, checkpoint, {"step": number}, {"n": number, "pad": number})
        print(f"acked {number}", flush=True)


def pairs(saver: FlowdropSaver, thread: str, tag: str, count: int) -> None:
    config: Any = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
    for i in range(count):
        checkpoint = empty_checkpoint()
        checkpoint["channel_values"] = {tag: i}
        checkpoint["channel_versions"] = {tag: i + 1}
        config = saver.put(config, checkpoint, {"step": i, "tag": tag}, {tag: i + 1})
        saver.put_writes(config, [("seen", f"{tag}-{i}")], f"task-{tag}-{i}")


def main(argv: list[str]) -> int:
    workspace, command, *rest = argv
    saver = FlowdropSaver(workspace=workspace)
    config: Any = {"configurable": {"thread_id": "review"}}
    if command == "ask":
        out = review_graph(saver).invoke({"count": 0, "answer": "", "notes": []}, config)
        print("interrupted" if "__interrupt__" in out else f"done {out}", flush=True)
    elif command == "answer":
        out = review_graph(saver).invoke(Command(resume=rest[0]), config)
        print(f"answer={out['answer']} count={out['count']}", flush=True)
    elif command == "puts":
        puts(saver, rest[0])
    elif command == "pairs":
        pairs(saver, rest[0], rest[1], int(rest[2]))
    elif command == "spin":
        try:
            spin_graph(saver).invoke({"n": 0}, {"configurable": {"thread_id": rest[0]}})
        except GraphStopped as exc:
            print(f"stopped: {exc}", flush=True)
            return 130
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
