"""One measured app, in its own process and terminal (run by ``ui_bench.py``, not by hand).

Modes:

``paint-ours WORKSPACE OUT``  the real ``flowdrop-tui`` entry point on WORKSPACE
``paint-bare OUT``            a bare Textual app painting a 50-row DataTable
``bare``                      the same app, nothing measured (``ui_tmux_paint.py``)
    Both write ``{"painted": wall time of the first frame holding 50 table rows,
    "cpu_s": the process's CPU seconds by then, "maxrss_kb": peak resident memory once
    the app has settled}``.

``latency-ours WORKSPACE OUT N``  flowdrop-tui following the live ``flow_00`` run
``latency-bare RUN_DIR OUT N``    a bare Textual app following that run's ``cycle.jsonl``
                                  with ``watchfiles.awatch`` at its defaults, into a Log
    Both write ``{"latencies": [...]}``: seconds from a ``tick`` event's own timestamp
    (taken just before its append) to the frame that shows its line.
"""

from __future__ import annotations

import importlib.util
import json
import resource
import sys
import time
from importlib.machinery import ModuleSpec
from pathlib import Path
from types import ModuleType
from typing import Any

SETTLE_LIMIT = 15.0  # seconds after the first paint to wait for start-up reads to finish


def _write(out: str, data: dict[str, Any]) -> None:
    # json, not orjson: the bare app must not be made to import what it does not use
    Path(out).write_text(json.dumps(data))


def _maxrss_kb() -> int:
    """This process's peak resident memory. Read from ``VmHWM``, which starts anew with
    the program: ``ru_maxrss`` keeps the peak of the process before its ``exec`` (the
    bench itself, when it has just built a workspace of 100,000 runs)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except OSError:
        pass
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)


class _WhenImported:
    """Call ``then(module)`` once ``name`` has been imported by whoever imports it: the
    spy is set without importing Textual ahead of the measured app (``cli.main``
    imports it after pausing the collector, as when a user starts the command)."""

    def __init__(self, name: str, then: Any) -> None:
        self.name, self.then = name, then

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> ModuleSpec | None:
        if fullname != self.name:
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(fullname)
        if spec is None or spec.loader is None:
            return spec
        loader, then = spec.loader, self.then

        class Then:  # a loader (importlib.abc would import importlib.resources)
            def create_module(self, spec: ModuleSpec) -> ModuleType | None:
                return loader.create_module(spec)

            def exec_module(self, module: ModuleType) -> None:
                loader.exec_module(module)
                then(module)

        spec.loader = Then()
        return spec


def _spy_on_first_table_paint(on_paint: Any) -> None:
    """Call ``on_paint(table)`` when a DataTable with 50+ rows first renders a row line."""
    name = "textual.widgets._data_table"
    if name in sys.modules:
        _spy(sys.modules[name].DataTable, on_paint)
    else:
        sys.meta_path.insert(0, _WhenImported(name, lambda m: _spy(m.DataTable, on_paint)))


def _spy(DataTable: Any, on_paint: Any) -> None:
    original = DataTable.render_line
    seen = False

    def render_line(self: Any, y: int) -> Any:
        nonlocal seen
        strip = original(self, y)
        if not seen and y >= 1 and self.row_count >= 50:
            seen = True
            on_paint(self)
        return strip

    DataTable.render_line = render_line


def paint_ours(workspace: str, out: str) -> None:
    """Everything the command imports is imported by the command, as when a user starts
    it (``cli.main``: the collector paused, Textual loaded only for the UI); this side
    imports what it checks with only after the first frame."""
    from flowdrop_tui import cli

    painted: list[float] = []
    cpu: list[float] = []

    def settled(app: Any) -> bool:
        from textual.worker import WorkerState

        main = app._main()
        if not main.ready:
            return False
        rows = main.flows.rows_by_name.values()
        if any(row.get("described") is False for row in rows):
            return False
        if main.runs.key != main.selected_flow or main.selected_run is None:
            return False
        return not any(
            w.group != "watch" and w.state in (WorkerState.PENDING, WorkerState.RUNNING)
            for w in app.workers
        )

    def on_paint(table: Any) -> None:
        painted.append(time.time())
        cpu.append(time.process_time())
        app = table.app
        deadline = time.monotonic() + SETTLE_LIMIT

        def check() -> None:
            if settled(app) or time.monotonic() > deadline:
                _write(
                    out,
                    {
                        "painted": painted[0],
                        "cpu_s": cpu[0],
                        "maxrss_kb": _maxrss_kb(),
                        "settled": settled(app),
                    },
                )
                app.exit()
            else:
                app.set_timer(0.05, check)

        app.call_later(check)

    _spy_on_first_table_paint(on_paint)
    cli.main(["--workspace", workspace])


def bare_app() -> Any:
    """The baseline of (a), (b): a bare Textual app painting a 50-row DataTable."""
    from textual.app import App, ComposeResult
    from textual.widgets import DataTable, Footer

    class Bare(App[None]):
        def compose(self) -> ComposeResult:
            yield DataTable(cursor_type="row")
            yield Footer()

        def on_mount(self) -> None:
            table = self.query_one(DataTable)
            for label in ("FLOW", "STATUS", "ROUND", "RESUMABLE", "LAST RUN", "ABOUT"):
                table.add_column(label)
            for n in range(50):
                table.add_row(
                    f"flow_{n:02d}",
                    "cancelled",
                    f"round {600 - n}",
                    "yes",
                    f"20260101T2206{n:02d}.000Z-0026{n:02x}",
                    f"Benchmark flow {n}",
                )
            table.focus()

    return Bare()


def paint_bare(out: str) -> None:
    def on_paint(table: Any) -> None:
        painted, cpu = time.time(), time.process_time()
        app = table.app

        def done() -> None:
            _write(
                out, {"painted": painted, "cpu_s": cpu, "maxrss_kb": _maxrss_kb(), "settled": True}
            )
            app.exit()

        app.call_later(done)

    _spy_on_first_table_paint(on_paint)
    bare_app().run()


def latency_ours(workspace: str, out: str, samples: int) -> None:
    """The clock stops when the compositor renders the tick's line into a frame (the
    frame goes to the terminal in the same call): the row is on screen."""
    from flowdrop_tui import cli
    from flowdrop_tui.tui.widgets.event_feed import EventFeed

    found: list[float] = []
    waiting: dict[int, float] = {}  # line index in the feed -> the tick's own timestamp
    in_history = False
    original_append = EventFeed.append
    original_history = EventFeed.show_history
    original_render = EventFeed.render_line

    def show_history(self: EventFeed, *args: Any) -> None:
        nonlocal in_history
        in_history = True  # the run's past, shown on selection: not an append to time
        try:
            original_history(self, *args)
        finally:
            in_history = False

    def append(self: EventFeed, events: list[dict[str, Any]]) -> None:
        first = len(self.lines)
        original_append(self, events)
        if in_history:
            return
        for offset, ev in enumerate(events):
            if ev.get("message") == "tick":
                waiting[first + offset] = float(ev["fields"]["sent"])

    def render_line(self: EventFeed, y: int) -> Any:
        strip = original_render(self, y)
        sent = waiting.pop(int(self.scroll_offset.y) + y, None)
        if sent is not None:
            found.append(time.time() - sent)
            if len(found) == samples:
                _write(out, {"latencies": found})
                self.app.call_later(self.app.exit)
        return strip

    EventFeed.append = append  # type: ignore[method-assign]
    EventFeed.show_history = show_history  # type: ignore[method-assign]
    EventFeed.render_line = render_line  # type: ignore[method-assign]
    cli.main(["--workspace", workspace])


def latency_bare(run_dir: str, out: str, samples: int) -> None:
    """The baseline: the naive follower a user could write in a few lines."""
    import orjson
    from textual.app import App, ComposeResult
    from textual.widgets import Log
    from watchfiles import awatch

    from flowdrop_tui.core.records.log.tail import EventTail

    found: list[float] = []
    waiting: dict[int, float] = {}  # line index in the log -> the tick's own timestamp
    original_render = Log.render_line

    def render_line(self: Log, y: int) -> Any:
        strip = original_render(self, y)
        sent = waiting.pop(int(self.scroll_offset.y) + y, None)
        if sent is not None:
            found.append(time.time() - sent)
            if len(found) == samples:
                _write(out, {"latencies": found})
                self.app.call_later(self.app.exit)
        return strip

    class Bare(App[None]):
        def compose(self) -> ComposeResult:
            yield Log()

        def on_mount(self) -> None:
            self.run_worker(self.follow(), exclusive=True)

        async def follow(self) -> None:
            log = self.query_one(Log)
            tail = EventTail(Path(run_dir) / "cycle.jsonl")
            for ev in tail.read().events:  # what is already there, not timed
                log.write_line(orjson.dumps(ev).decode())
            async for _changes in awatch(run_dir):
                for ev in tail.read().events:
                    if ev.get("message") == "tick":
                        waiting[log.line_count] = float(ev["fields"]["sent"])
                    log.write_line(orjson.dumps(ev).decode())

    Log.render_line = render_line  # type: ignore[method-assign]
    Bare().run()


if __name__ == "__main__":
    mode, *args = sys.argv[1:]
    if mode == "paint-ours":
        paint_ours(args[0], args[1])
    elif mode == "paint-bare":
        paint_bare(args[0])
    elif mode == "bare":  # unmeasured: ui_tmux_paint.py watches its screen from outside
        bare_app().run()
    elif mode == "latency-ours":
        latency_ours(args[0], args[1], int(args[2]))
    elif mode == "latency-bare":
        latency_bare(args[0], args[1], int(args[2]))
    else:
        raise SystemExit(f"unknown mode {mode}")
