"""The ``flowdrop-tui`` command. Imports the terminal UI lazily, only for the bare command.

Exit codes (SPEC §11): 0 done (completed, paused, or started detached); 1 the
flow failed or could not be loaded; 2 usage error or something named does not
exist; 3 refused; 130 stopped (cancelled). With ``--json``, errors are
``{"error": {"code", "message"}}`` on stdout.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import orjson

from flowdrop_tui.core import retention, views
from flowdrop_tui.core.control import launch, verbs
from flowdrop_tui.core.errors import FlowdropError, UsageError
from flowdrop_tui.core.flows.discovery import FlowRef, resolve_flow
from flowdrop_tui.core.paths import OUTPUT, Layout, find_workspace
from flowdrop_tui.core.records import ledger, output_log, pins
from flowdrop_tui.core.records.budget import KINDS, check_limit
from flowdrop_tui.core.records.events import (
    ENDED,
    LIVE,
    Status,
    list_run_ids,
    load_run,
    side_value,
)
from flowdrop_tui.core.records.follow import RunFollower
from flowdrop_tui.core.records.nesting import clip
from flowdrop_tui.core.remote.executor import TEMPORAL_USED, Executor, executor_for
from flowdrop_tui.core.run.execution import Execution
from flowdrop_tui.core.run.forecast import StartOptions, forecast_flow, runnable
from flowdrop_tui.core.run.opening import flow_of_key, open_run, reopen_paused
from flowdrop_tui.format import (
    asked_text,
    budget_reached_words,
    error_words,
    flows_table,
    plan_text,
    prune_text,
    rounds_range,
    runs_table,
    show_text,
    start_words,
    usage_words,
)

if TYPE_CHECKING:
    from flowdrop_tui.core.remote.config import RemoteConfig


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{message} (see: {self.prog} --help)")


def _dump(value: Any) -> str:
    try:
        return orjson.dumps(value, default=str, option=orjson.OPT_INDENT_2).decode()
    except TypeError:  # orjson's own error too: nested past what it writes (a forged record)
        return orjson.dumps(clip(value), default=str, option=orjson.OPT_INDENT_2).decode()


def _err(message: str) -> None:
    try:
        print(message, file=sys.stderr, flush=True)
    except (OSError, ValueError):
        pass  # stderr full, closed or gone: the exit status still tells


def _out(text: str) -> None:
    """Print ``text`` on stdout, now; a stdout that cannot take it (a full disk, a closed
    descriptor) is said on stderr, never turned into a traceback and another exit status."""
    try:
        print(text, flush=True)
    except (OSError, ValueError) as exc:
        _stdout_failed(exc)


def _stdout_failed(exc: Exception) -> None:
    reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
    _err(f"flowdrop-tui: could not write to standard output ({reason})")
    # What is still buffered goes nowhere from now: the interpreter's own flush at
    # exit would fail again and turn the exit status into 120.
    try:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, sys.stdout.fileno())
        os.close(null)
    except (OSError, ValueError):
        pass


class Warnings:
    """What a command warns of: printed on stderr as it happens (the core's ``notify``)
    and kept, without the ``warning:`` prefix, for its ``--json`` output's ``"warnings"``."""

    PREFIX = "warning: "

    def __init__(self) -> None:
        self.items: list[str] = []

    def __call__(self, text: str) -> None:
        _err(text)
        if text.startswith(self.PREFIX):
            self.items.append(text.removeprefix(self.PREFIX))

    def add(self, text: str) -> None:
        self(self.PREFIX + text)


def _limit(kind: str) -> Callable[[str], float | int | None]:
    """``--max-rounds 50``: a positive number (whole for rounds and tokens); ``none``
    lifts the limit for this chain."""

    def parse(text: str) -> float | int | None:
        if text.strip().lower() in ("none", "off"):
            return None
        try:
            value: float = float(text) if kind == "minutes" else int(text)
            return check_limit(kind, value, f"--max-{kind}")
        except ValueError:
            whole = "a whole number" if kind != "minutes" else "a number"
            raise argparse.ArgumentTypeError(
                f"--max-{kind} takes {whole} more than 0 (or none for no limit), not {text!r}"
            ) from None

    return parse


def build_parser() -> argparse.ArgumentParser:
    common = _Parser(add_help=False)
    common.add_argument(
        "--workspace", metavar="DIR", default=argparse.SUPPRESS, help="the workspace folder"
    )
    json_flag = _Parser(add_help=False)
    json_flag.add_argument("--json", action="store_true", help="machine-readable output")
    budget = _Parser(add_help=False)
    spent = {"rounds": "rounds", "minutes": "minutes of running", "tokens": "tokens"}
    for kind, what in spent.items():
        budget.add_argument(
            f"--max-{kind}",
            dest=f"max_{kind}",
            metavar="N",
            type=_limit(kind),
            default=argparse.SUPPRESS,
            help=f"at most N {what} along the chain (none: no limit); the runs picked up "
            "after this one keep it",
        )
    budget.add_argument(
        "--strict", action="store_true", help="refuse to start when the flow or git drifted"
    )

    parser = _Parser(
        prog="flowdrop-tui",
        description="Long loops in a repository: list, launch, stop, pause and pick up flows.",
        parents=[common],
    )
    parser.add_argument("--version", action="version", version="flowdrop-tui 0.1.0")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    run = sub.add_parser(
        "run", parents=[common, json_flag, budget], help="run a flow (picks up when it can)"
    )
    plan = sub.add_parser(
        "plan", parents=[common, json_flag, budget], help="what run would do, doing nothing"
    )
    for verb in (run, plan):
        verb.add_argument(
            "flow", metavar="FLOW", help="a flow name, or a path to its folder or flow.py"
        )
        start = verb.add_mutually_exclusive_group()
        start.add_argument("--from", dest="from_run", metavar="RUN", help="pick up from this run")
        start.add_argument("--resume", metavar="CHECKPOINT", help="resume this paused run")
        start.add_argument("--snapshot", metavar="FILE", help="start from this snapshot file")
        start.add_argument(
            "--fresh", action="store_true", help="start a new chain: round 1, no state"
        )
    run.add_argument("--detach", action="store_true", help="run in the background")
    run.add_argument("--handshake-fd", type=int, help=argparse.SUPPRESS)

    stop = sub.add_parser("stop", parents=[common, json_flag], help="stop a run after its round")
    stop.add_argument("run", metavar="RUN")
    stop.add_argument("--now", action="store_true", help="interrupt the round in flight")
    stop.add_argument("--wait", action="store_true", help="return once the run has ended")

    pause = sub.add_parser("pause", parents=[common, json_flag], help="pause a run after its round")
    pause.add_argument("run", metavar="RUN")
    pause.add_argument("--wait", action="store_true", help="return once the run has paused")

    resume = sub.add_parser(
        "resume", parents=[common, json_flag, budget], help="continue a paused run"
    )
    resume.add_argument("run", metavar="RUN")
    resume.add_argument("--detach", action="store_true", help="continue in the background")
    resume.add_argument("--handshake-fd", type=int, help=argparse.SUPPRESS)
    resume.add_argument("--by", help=argparse.SUPPRESS)  # who asked, for a detached resume

    sub.add_parser("flows", parents=[common, json_flag], help="list the flows")
    runs = sub.add_parser("runs", parents=[common, json_flag], help="list runs, newest first")
    runs.add_argument("flow", metavar="FLOW", nargs="?")
    page = runs.add_mutually_exclusive_group()
    page.add_argument(
        "--limit", type=int, metavar="N", default=views.RUNS_PAGE, help="the newest N (50)"
    )
    page.add_argument("--all", action="store_true", help="every run")
    show = sub.add_parser("show", parents=[common, json_flag], help="one run in full")
    show.add_argument("run", metavar="RUN")
    logs = sub.add_parser(
        "logs", parents=[common, json_flag], help="what a run's flow printed (its output.log)"
    )
    logs.add_argument("run", metavar="RUN")
    logs.add_argument(
        "-f", "--follow", action="store_true", help="keep printing until the run stops"
    )
    logs.add_argument("-n", "--lines", type=int, metavar="N", help="only the last N lines")
    snapshot = sub.add_parser(
        "snapshot", parents=[common, json_flag], help="print a run's snapshot (always JSON)"
    )
    snapshot.add_argument("run", metavar="RUN")
    sub.add_parser("reindex", parents=[common, json_flag], help="rebuild .flowdrop/index.json")
    serve = sub.add_parser(
        "serve",
        parents=[common],
        help="serve the UI to a browser",
        description="Serve this workspace's UI to a browser. Whoever opens the URL can start"
        " and stop runs here: any address but loopback needs the token. Ctrl-C stops"
        " serving; runs go on.",
    )
    serve.add_argument(
        "--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)"
    )
    serve.add_argument("--port", type=int, default=8765, help="port (default 8765; 0 picks one)")
    serve.add_argument(
        "--token",
        help="the secret a browser must bring (default: $FLOWDROP_SERVE_TOKEN, or one made"
        " up when the address is not loopback)",
    )
    prune = sub.add_parser(
        "prune", parents=[common, json_flag], help="delete old ended runs (never what is picked up)"
    )
    prune.add_argument(
        "--keep",
        type=_count,
        default=retention.DEFAULT_KEEP,
        metavar="N",
        help=f"keep the newest N runs of each flow (default {retention.DEFAULT_KEEP})",
    )
    prune.add_argument(
        "--older-than",
        metavar="DURATION",
        help="delete only runs that ended longer ago than this (30d, 12h, 1d12h)",
    )
    prune.add_argument("--dry-run", action="store_true", help="say what would go; delete nothing")
    pin = sub.add_parser("pin", parents=[common, json_flag], help="never prune this run")
    pin.add_argument("run", metavar="RUN")
    unpin = sub.add_parser("unpin", parents=[common, json_flag], help="let prune delete it again")
    unpin.add_argument("run", metavar="RUN")
    worker = sub.add_parser(
        "worker",
        parents=[common],
        help="take runs from the cluster (remote mode; a daemon per machine)",
        description="Poll Temporal for runs of flows and run them here, each in a git worktree"
        " of the asked commit; records go to PostgreSQL. Servers come from the flags, else"
        " FLOWDROP_TEMPORAL/FLOWDROP_POSTGRES/…, else the workspace's .flowdrop/config.toml"
        " [remote]. Ctrl-C or SIGTERM asks its runs to stop after their round, then exits.",
    )
    worker.add_argument("--id", help="this worker's id (default: HOST-PID); names its own queue")
    worker.add_argument(
        "--home",
        metavar="DIR",
        help="where its mirror clones and worktrees live (default: ~/.flowdrop-worker)",
    )
    worker.add_argument(
        "--max-runs", type=_positive, default=4, metavar="N", help="runs at once (default 4)"
    )
    worker.add_argument("--temporal", metavar="HOST:PORT", help="the Temporal frontend")
    worker.add_argument("--namespace", help="the Temporal namespace (default: default)")
    worker.add_argument("--task-queue", metavar="NAME", help="the shared queue (default: flowdrop)")
    worker.add_argument("--postgres", metavar="URL", help="the PostgreSQL URL of the records")
    return parser


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of runs (1 or more)")
    return value


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of runs (0 or more)")
    return value


# -- helpers -------------------------------------------------------------------------------


def _layout(args: argparse.Namespace) -> Layout:
    return Layout(find_workspace(override=getattr(args, "workspace", None)))


def _remote(layout: Layout) -> RemoteConfig | None:
    """The workspace's remote settings; ``None`` in local mode (this reads one small file
    with tomllib: no driver is imported unless remote mode is configured)."""
    from flowdrop_tui.core.remote import config

    return config.load(layout)


def _read_layout(args: argparse.Namespace, *, run_refs: bool = False) -> Layout:
    """The workspace to read; in remote mode its replica is brought up to date first
    (``run_refs``: also the commits workers pushed), so every read answers as locally."""
    layout = _layout(args)
    remote = _remote(layout)
    if remote is not None:
        from flowdrop_tui.core.remote import reading

        for problem in reading.synced(layout, remote, run_refs=run_refs):
            args.warnings.add(problem)
    return layout


def _checked_flow(layout: Layout, name: str, ref: FlowRef | None = None) -> FlowRef:
    """Resolve FLOW and load it in a child process first: a broken or hanging flow is
    refused (exit 1, naming file and line) before anything else happens."""
    ref = ref or resolve_flow(layout, name)
    runnable(layout, ref)
    return ref


def _options(args: argparse.Namespace) -> StartOptions:
    """What ``run``/``resume``/``plan`` were asked, as the core takes it."""
    snapshot = getattr(args, "snapshot", None)
    limits = {k: getattr(args, f"max_{k}") for k in KINDS if hasattr(args, f"max_{k}")}
    return StartOptions(
        snapshot=Path(snapshot).resolve() if snapshot else None,
        resume=getattr(args, "resume", None),
        from_run=getattr(args, "from_run", None),
        fresh=bool(getattr(args, "fresh", False)),
        limits=limits,
        strict=bool(args.strict),
    )


def _option_args(options: StartOptions) -> list[str]:
    """The budget and drift flags, passed on to a detached run's process."""
    passed = []
    for kind, value in options.limits.items():
        passed += [f"--max-{kind}", "none" if value is None else str(value)]
    return passed + (["--strict"] if options.strict else [])


def _announce(execution: Execution) -> None:
    frame = execution.main
    if execution.resumed_by is not None:
        _err(f"resuming run {execution.run_id} of {frame.key} at round {frame.round + 1}")
        return
    events = load_run(execution.layout, execution.run_id)
    how = start_words(events.start, events.source, events.snapshot)
    _err(f"run {execution.run_id} of {frame.key} — {how}, round {frame.first_round}")


def _finish_foreground(execution: Execution, as_json: bool, warnings: Warnings) -> int:
    _announce(execution)
    capture = sys.stderr if as_json else sys.stdout
    outcome = execution.execute(capture=capture)
    info = load_run(execution.layout, outcome.run_id)
    rounds = (
        f"rounds {rounds_range(info.first_round, info.last_round)}"
        if info.last_round
        else "no rounds"
    )
    message = f"run {outcome.run_id} {outcome.status} ({rounds})"
    if outcome.status == Status.PAUSED and info.budget_reached:
        reached = info.budget_reached
        message += (
            f": {budget_reached_words(reached)}; raise it to go on: flowdrop-tui resume "
            f"{outcome.run_id} --max-{reached.get('budget')} N"
        )
    elif outcome.status == Status.PAUSED:
        message += f"; continue it with: flowdrop-tui resume {outcome.run_id}"
    elif outcome.error:
        message += f": {error_words(outcome.error)}"
    _err(message)
    if as_json:
        result = side_value(info.path, info.result)  # a big one: from its side file
        answer = {**info.summary(), "result": result, "error": info.error}
        _out(_dump({**answer, "warnings": warnings.items}))
    return outcome.exit_code


def _detached_child(args: argparse.Namespace, make: Callable[[Warnings], Execution]) -> int:
    """This process is a detached run: report creation (or refusal) through the pipe.
    What it warns of goes to the starter through the pipe; once the run exists, also to
    its ``output.log`` (this process's stderr from then on)."""
    fd = int(args.handshake_fd)
    warnings: Warnings = args.warnings
    try:
        execution = make(warnings)
    except FlowdropError as exc:
        launch.report_refusal(fd, exc)
        return exc.exit_code
    launch.report_created(fd, execution.run_dir, execution.run_id, execution.key, warnings.items)
    for warning in warnings.items:  # the run's output.log from now on
        _err(f"{Warnings.PREFIX}{warning}")
    return execution.execute().exit_code


def _print_launched(
    answer: dict[str, Any], args: argparse.Namespace, *, remote: bool = False
) -> int:
    """The run exists (in the background here, or on a worker); ``remote``: the user
    asked for a foreground run, which remote mode starts on a worker all the same."""
    warnings: Warnings = args.warnings
    for warning in answer.get("warnings") or []:
        warnings.add(str(warning))
    if args.json:
        launched = {"run": answer.get("run"), "flow": answer.get("flow")}
        print(_dump({**launched, "warnings": warnings.items}))
    else:
        print(answer.get("run"))
    if remote:
        _err(
            f"run {answer.get('run')} is on worker {answer.get('worker')}; follow it with: "
            f"flowdrop-tui logs -f {answer.get('run')}"
        )
    return 0


def _wait(
    layout: Layout,
    run_id: str,
    done: Callable[[Status], bool],
    timeout: float,
    refresh: Callable[[], None] | None = None,
) -> Status:
    deadline = time.monotonic() + timeout
    while True:
        if refresh is not None:
            refresh()
        status = load_run(layout, run_id).status
        if done(status) or time.monotonic() > deadline:
            return status
        time.sleep(0.1 if refresh is None else 0.5)


# -- commands ------------------------------------------------------------------------------


def cmd_run(args: argparse.Namespace) -> int:
    layout = _layout(args)
    ref = _checked_flow(layout, args.flow)
    options = _options(args)
    if args.handshake_fd is None:
        executor = executor_for(layout)
        if args.detach or executor.remote:
            answer = executor.start(ref, options, _option_args(options))
            return _print_launched(answer, args, remote=executor.remote and not args.detach)

    def make(warnings: Warnings) -> Execution:
        return open_run(layout, ref, options=options, notify=warnings)

    if args.handshake_fd is not None:
        return _detached_child(args, make)
    return _finish_foreground(make(args.warnings), args.json, args.warnings)


def cmd_plan(args: argparse.Namespace) -> int:
    """What ``run`` would do, doing nothing; exits as ``run`` would refuse (0: it would
    start), so ``plan FLOW && run FLOW`` reads as it should."""
    layout = _read_layout(args)
    found = forecast_flow(layout, args.flow, _options(args))
    answer = found.to_json()
    print(_dump(answer) if args.json else plan_text(answer))
    return found.refusal.exit_code if found.refusal is not None else 0


def _asker(given: str | None) -> dict[str, Any]:
    """Who asked for a resume: passed on by a detached launch, else this command."""
    if given:
        try:
            asker = orjson.loads(given)
        except orjson.JSONDecodeError:
            asker = None
        if isinstance(asker, dict):
            return {str(k): v for k, v in asker.items() if k in ("pid", "user", "host", "via")}
    return {"via": "cli"}


def cmd_resume(args: argparse.Namespace) -> int:
    layout = _layout(args)
    options = _options(args)
    if args.handshake_fd is None:
        executor = executor_for(layout)
        if args.detach or executor.remote:
            answer = executor.resume(args.run, _option_args(options))
            return _print_launched(answer, args, remote=executor.remote and not args.detach)

    def make(warnings: Warnings) -> Execution:
        # The flow is loaded in this process to continue the run: first in a child,
        # with its 5 s limit, so one that now fails or hangs at import is refused as
        # `run` refuses it, instead of hanging this process with the run held.
        info = verbs.check_resumable(layout, args.run)
        if info.key is not None:
            _checked_flow(layout, info.key, flow_of_key(layout, info.key))
        return reopen_paused(layout, args.run, options=options, by=_asker(args.by), notify=warnings)

    if args.handshake_fd is not None:
        return _detached_child(args, make)
    return _finish_foreground(make(args.warnings), args.json, args.warnings)


def _asked(
    args: argparse.Namespace,
    asked: verbs.Asked,
    done: Callable[[Status], bool],
    timeout: float,
    refresh: Callable[[], None] | None = None,
) -> int:
    """Report a stop or pause request; with ``--wait``, once the run has acted on it.
    ``status`` is the run's status as the command returns: a paused run that ``stop``
    closed is ``cancelled`` at once; a live one without ``--wait`` is still ``running``."""
    message = asked_text(asked)
    if args.wait:
        status = _wait(_layout(args), args.run, done, timeout, refresh)
        message += f"; it is now {status}"
    else:
        if refresh is not None:
            refresh()
        status = load_run(_layout(args), args.run).status
    if args.json:
        shown = {"run": args.run, "action": str(asked.action), "round": asked.round}
        print(_dump({**shown, "message": message, "status": str(status)}))
    else:
        print(message)
    return 0


def _refresh(executor: Executor) -> Callable[[], None] | None:
    """Remote mode reads the run from its replica: brought up to date before each look."""
    sync: Callable[[], None] | None = getattr(executor, "sync", None)
    return sync if executor.remote else None


def cmd_stop(args: argparse.Namespace) -> int:
    executor = executor_for(_layout(args))
    asked = executor.stop(args.run, now=args.now)
    return _asked(args, asked, lambda s: s in ENDED, 30.0, _refresh(executor))


def cmd_pause(args: argparse.Namespace) -> int:
    executor = executor_for(_layout(args))
    asked = executor.pause(args.run)
    return _asked(args, asked, lambda s: s not in LIVE, 3600.0, _refresh(executor))


def cmd_flows(args: argparse.Namespace) -> int:
    layout = _read_layout(args)
    rows = views.flow_rows(layout)
    if args.json:
        print(_dump(rows))
    elif not rows:
        print(f"no flows in {layout.flows} yet — a flow is a folder flows/<name>/ holding flow.py")
    else:
        print(flows_table(rows))
        used = ledger.workspace_usage(layout)
        print(f"\n{usage_words(used.runs, used.bytes)} (flowdrop-tui prune deletes old runs)")
    return 0


def cmd_runs(args: argparse.Namespace) -> int:
    layout = _read_layout(args)
    if not args.all and args.limit < 1:
        raise UsageError("--limit takes a number of runs, 1 or more")
    limit = None if args.all else args.limit
    if args.flow:
        key, infos, total = views.runs_named(layout, args.flow, limit=limit)
    else:
        key = None
        infos, total = views.run_page(layout, None, limit=limit)
    pinned = pins.pinned(layout)
    rows = [{**info.summary(), "pinned": info.run in pinned} for info in infos]
    if args.json:
        print(_dump(rows))
    elif not rows:
        print("no runs yet" + (f" of {key}" if key else ""))
    else:
        print(runs_table(rows))
        if total > len(rows) and not args.all:
            print(f"the newest {len(rows)} of {total} runs; --limit N or --all for more")
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    layout = _read_layout(args, run_refs=True)
    detail = views.run_detail(layout, args.run)
    print(_dump(detail) if args.json else show_text(detail))
    return 0


FOLLOW_EVERY = 0.2  # seconds between looks at a followed run's output and status


def cmd_logs(args: argparse.Namespace) -> int:
    """SPEC §15: the run's output.log; ``-f`` follows it until the run stops (ends or
    pauses). With ``--json``: one object; with ``-f --json``, JSON lines, then the status."""
    layout = _read_layout(args)
    info = load_run(layout, args.run)
    if args.lines is not None and args.lines < 1:
        raise UsageError(f"--lines takes a number of lines, 1 or more (not {args.lines})")
    path = info.path / OUTPUT
    tail = output_log.OutputTail(path, last=args.lines, max_bytes=None)
    if args.follow:
        return _follow_output(layout, info.run, tail, args.json)
    if args.json:
        lines = tail.read_all(final=True).lines
        answer = {"run": info.run, "status": str(info.status), "path": str(path)}
        print(_dump({**answer, "lines": lines, "truncated": tail.skipped > 0}))
        return 0
    while True:  # chunk by chunk: a week-long run's log is never held whole
        read = tail.read(final=True)
        _print_lines(read.lines, False)
        if not read.more:
            return 0


def _follow_output(layout: Layout, run_id: str, tail: output_log.OutputTail, as_json: bool) -> int:
    remote = _remote(layout)
    if remote is None:
        return _follow_lines(layout, run_id, tail, as_json, lambda: False)
    from flowdrop_tui.core.records.liveness import remote_holder
    from flowdrop_tui.core.remote import reading

    # The replica follows PostgreSQL (LISTEN/NOTIFY) while the lines are read from it:
    # what a worker's run prints on another machine appears here as it is shipped.
    run_dir = layout.run_dir(run_id)
    let_go: list[bool] = []
    with reading.following(layout, remote) as check:

        def held() -> bool:
            # The worker ships the run's last output after the run's end event, and only
            # then lets go of it (the replica's marker goes). Seen let go: one more sync,
            # so every line committed before that is here for the last read.
            check()
            if remote_holder(run_dir) is not None:
                return True
            if not let_go:
                let_go.append(True)
                reading.synced(layout, remote)
                return True
            return False

        return _follow_lines(layout, run_id, tail, as_json, held)


def _follow_lines(
    layout: Layout,
    run_id: str,
    tail: output_log.OutputTail,
    as_json: bool,
    held: Callable[[], bool],
) -> int:
    """Print until the run has stopped and nothing holds it any more (``held``: remote
    mode's worker, still shipping its output; it raises when the replica stopped
    following, so a run is never shown as running for ever)."""
    follower = RunFollower(layout, run_id, output=False)
    while True:
        status = follower.poll().info.status  # first: once it is seen stopped, all is written
        live = held() or status in LIVE
        while True:
            read = tail.read(final=not live)
            if read.restarted:
                _err(f"flowdrop-tui: {tail.path} was replaced or cut short; read from its start")
            _print_lines(read.lines, as_json)
            if not read.more:
                break
        if not live:
            break
        time.sleep(FOLLOW_EVERY)
    if as_json:
        print(orjson.dumps({"run": run_id, "status": str(status)}).decode(), flush=True)
    else:
        _err(f"run {run_id}: {status}")
    return 0


def _print_lines(lines: list[str], as_json: bool) -> None:
    out = [orjson.dumps({"line": line}).decode() for line in lines] if as_json else lines
    if out:
        sys.stdout.write("\n".join(out) + "\n")
        sys.stdout.flush()


def cmd_snapshot(args: argparse.Namespace) -> int:
    print(_dump(views.run_snapshot(_read_layout(args), args.run)))
    return 0


def cmd_reindex(args: argparse.Namespace) -> int:
    layout = _read_layout(args)
    from flowdrop_tui.core.records import index

    data = index.rebuild(layout, strict=True)
    count = len(list_run_ids(layout))
    if args.json:
        print(_dump({"runs": count, "keys": len(data["keys"])}))
    else:
        print(f"rebuilt {layout.index} from {count} runs ({len(data['keys'])} keys)")
    return 0


def cmd_prune(args: argparse.Namespace) -> int:
    layout = _layout(args)
    older = retention.parse_duration(args.older_than) if args.older_than is not None else None
    remote = _remote(layout)
    if remote is not None:
        from flowdrop_tui.core.remote import pruning

        result = pruning.prune(layout, remote, args.keep, older, dry_run=args.dry_run)
    else:
        result = retention.prune(layout, args.keep, older, dry_run=args.dry_run)
    report = result.as_json()
    print(_dump(report) if args.json else prune_text(report))
    return 0


def _pin(args: argparse.Namespace, change: Callable[[Layout, str], bool], done: str) -> int:
    layout = _layout(args)
    remote = _remote(layout)
    if remote is not None:  # the pin reaches every machine: a row in PostgreSQL
        from flowdrop_tui.core.remote import pins as remote_pins
        from flowdrop_tui.core.remote import reading

        layout = _read_layout(args)  # the run must be known here, as locally
        pinning = remote_pins.pin if done == "pinned" else remote_pins.unpin
        changed = reading.bounded(
            remote, "the pin", lambda: pinning(layout, remote, args.run), reading.SYNC_TIMEOUT
        )
    else:
        changed = change(layout, args.run)
    message = f"run {args.run} {done}" if changed else f"run {args.run} was already {done}"
    if args.json:
        print(_dump({"run": args.run, "pinned": done == "pinned", "changed": changed}))
    else:
        print(message)
    return 0


def cmd_pin(args: argparse.Namespace) -> int:
    return _pin(args, pins.pin, "pinned")


def cmd_unpin(args: argparse.Namespace) -> int:
    return _pin(args, pins.unpin, "unpinned")


def cmd_worker(args: argparse.Namespace) -> int:
    """The worker daemon (remote mode). Imported here: only remote mode loads temporalio."""
    import asyncio

    from flowdrop_tui.core.remote import config, worker

    try:
        layout: Layout | None = _layout(args)
    except FlowdropError:
        layout = None
    found = config.load(layout) if layout is not None else None
    temporal = args.temporal or (found.temporal if found else None)
    postgres = args.postgres or (found.postgres if found else None)
    if not temporal or not postgres:
        raise UsageError(
            "a worker needs the Temporal server and the PostgreSQL URL: --temporal HOST:PORT "
            "and --postgres URL (or FLOWDROP_TEMPORAL and FLOWDROP_POSTGRES)"
        )
    if args.temporal:
        temporal = config.temporal_address(temporal, "--temporal")
    if args.postgres:
        postgres = config.postgres_url(postgres, "--postgres")
    worker_id = args.id if args.id is not None else worker.default_worker_id()
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}", worker_id):
        raise UsageError(
            f"invalid worker id {worker_id!r}: letters, digits, '.', '_' and '-' (it names "
            "the worker's own task queue)"
        )
    settings = worker.WorkerSettings(
        temporal=temporal,
        namespace=args.namespace or (found.namespace if found else config.DEFAULT_NAMESPACE),
        task_queue=args.task_queue or (found.task_queue if found else config.DEFAULT_TASK_QUEUE),
        worker_id=worker_id,
        home=Path(args.home or Path.home() / ".flowdrop-worker").resolve(),
        max_runs=args.max_runs,
        access=worker.PostgresAccess(postgres),
    )
    TEMPORAL_USED.append(True)
    return asyncio.run(worker.serve(settings, _err))


def cmd_ui(args: argparse.Namespace) -> int:
    # Remote mode: synced before the UI opens, so an unreachable server is one line here.
    layout = _read_layout(args)
    from flowdrop_tui.tui.app import (
        run_app,  # here, not at the top: the commands never load Textual
    )

    return run_app(layout, _remote(layout))


def cmd_serve(args: argparse.Namespace) -> int:
    layout = _layout(args)
    # Imported here: only `serve` loads aiohttp and Textual.
    from flowdrop_tui.serve.access import Access, bind_is_loopback, check_token, new_token
    from flowdrop_tui.serve.server import TOKEN_ENV, serve

    if not 0 <= args.port <= 65535:
        raise UsageError(f"--port {args.port} is not a port (0-65535)")
    token = args.token if args.token is not None else os.environ.get(TOKEN_ENV) or None
    if token is not None:
        check_token(token)
    elif not bind_is_loopback(args.host):
        # Whoever reaches a non-loopback address could start and stop runs.
        token = new_token()
    return serve(layout, args.host, args.port, Access(token=token, port=args.port))


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "run": cmd_run,
    "plan": cmd_plan,
    "resume": cmd_resume,
    "stop": cmd_stop,
    "pause": cmd_pause,
    "flows": cmd_flows,
    "runs": cmd_runs,
    "show": cmd_show,
    "logs": cmd_logs,
    "snapshot": cmd_snapshot,
    "reindex": cmd_reindex,
    "serve": cmd_serve,
    "prune": cmd_prune,
    "pin": cmd_pin,
    "unpin": cmd_unpin,
    "worker": cmd_worker,
}


def main(argv: Sequence[str] | None = None) -> int:
    TEMPORAL_USED.clear()
    code = _main(argv)
    if TEMPORAL_USED:
        # Remote mode's Temporal client leaves its core runtime's threads running, and
        # letting the interpreter tear down under them aborts the process now and then
        # (SIGSEGV/SIGABRT after the answer was printed, turning exit 0 into -11):
        # everything is said and flushed, so leave without the teardown.
        with contextlib.suppress(OSError, ValueError):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)
    return code


def _main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    as_json = "--json" in argv
    warnings = Warnings()
    try:
        if os.environ.get("FLOWDROP_REMOTE_RUN"):  # a run child on a worker (docs/remote.md)
            from flowdrop_tui.core.remote.mirror import install_from_env

            install_from_env()
        args = build_parser().parse_args(argv)
        args.warnings = warnings
        handler = COMMANDS.get(args.command or "", cmd_ui)
        code = handler(args)
        try:
            sys.stdout.flush()  # here, not at exit: a failure is said, and the status kept
        except (OSError, ValueError) as exc:
            _stdout_failed(exc)
        return code
    except FlowdropError as exc:
        if as_json:
            extra = {"warnings": warnings.items} if warnings.items else {}
            print(_dump({**exc.as_json(), **extra}))
        _err(f"flowdrop-tui: {exc.message}")
        return exc.exit_code
    except KeyboardInterrupt:
        _err("flowdrop-tui: interrupted")
        return 130
    except BrokenPipeError:
        return 0
